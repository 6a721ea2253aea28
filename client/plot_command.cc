// `ringleader plot JOB -o FILE.svg|FILE.png`: the job's per-rank metrics as charts
// (plot_svg.h). A .svg is written atomically; a .png is the SVG converted by rsvg-convert
// (Debian's librsvg2-bin) from a temporary file next to the output, then renamed into place.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/plot_svg.h"

extern char** environ;

namespace ringleader {
namespace {

// The most of the converter's output quoted in an error.
constexpr size_t kMaxQuotedOutput = 2000;

// ".svg", ".png", ... in lower case; "" without an extension.
std::string Extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return absl::AsciiStrToLower(path.substr(dot));
}

bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// The executable `program` names: itself when it holds a '/', else the first PATH entry that
// has it; "" when there is none.
std::string FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return IsExecutableFile(program) ? program : "";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

// Runs `argv` (argv[0] a path) and waits for it. INTERNAL with its exit status and output when
// it fails.
absl::Status RunProgram(const std::vector<std::string>& argv) {
  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(output[1]);
  std::string text;
  if (spawned == 0) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(output[0], buffer, sizeof(buffer))) != 0) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (text.size() < kMaxQuotedOutput) text.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(output[0]);
  if (spawned != 0) {
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(spawned)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string how = WIFEXITED(status)
                              ? absl::StrCat("exited with code ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::InternalError(absl::StrCat(
      argv[0], " ", how, ": ", absl::StripAsciiWhitespace(text.substr(0, kMaxQuotedOutput))));
}

// Writes `svg` as a PNG at `path`: the SVG in a temporary file, rsvg-convert into another one,
// renamed to `path`. The temporary files are removed either way.
absl::Status WritePng(const std::string& rsvg_convert, const std::string& path,
                      const std::string& svg) {
  const std::string program = FindProgram(rsvg_convert);
  if (program.empty()) return CheckPlotOptions(PlotOptions{path, rsvg_convert});
  const std::string svg_file = absl::StrCat(path, ".tmp.", ::getpid(), ".svg");
  const std::string png_file = absl::StrCat(path, ".tmp.", ::getpid(), ".png");
  if (const int error = WriteFileAtomically(svg_file, svg); error != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", svg_file, ": ", std::strerror(error)));
  }
  absl::Status converted = RunProgram({program, "--format=png", "--output", png_file, svg_file});
  ::unlink(svg_file.c_str());
  if (converted.ok() && ::rename(png_file.c_str(), path.c_str()) != 0) {
    converted = absl::InternalError(
        absl::StrCat("cannot rename ", png_file, " to ", path, ": ", std::strerror(errno)));
  }
  if (!converted.ok()) ::unlink(png_file.c_str());
  return converted;
}

// "job-000003 · generation 1 · steps 1..16"
std::string Title(const std::string& job_id, const v1::GetJobMetricsResponse& metrics) {
  std::string title = absl::StrCat(job_id, " \xC2\xB7 generation ", metrics.generation());
  if (metrics.points_size() > 0) {
    const auto [first, last] = std::minmax_element(
        metrics.points().begin(), metrics.points().end(),
        [](const v1::MetricsPoint& a, const v1::MetricsPoint& b) { return a.step() < b.step(); });
    absl::StrAppend(&title, " \xC2\xB7 steps ", first->step(), "..", last->step());
  }
  return title;
}

}  // namespace

absl::Status CheckPlotOptions(const PlotOptions& options) {
  if (options.output_path.empty()) {
    return absl::InvalidArgumentError(
        "plot: -o FILE (--output) is required: FILE.svg, or FILE.png (converted by rsvg-convert)");
  }
  const std::string extension = Extension(options.output_path);
  if (extension != ".svg" && extension != ".png") {
    return absl::InvalidArgumentError(absl::StrCat(
        "-o/--output: '", options.output_path, "': plot writes .svg or .png files (got ",
        extension.empty() ? "no extension" : "'" + extension + "'", "); e.g. -o charts.svg"));
  }
  if (extension == ".png" && FindProgram(options.rsvg_convert).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "-o/--output: '", options.output_path, "': a PNG is converted from the SVG by ",
        options.rsvg_convert, ", which is not ",
        options.rsvg_convert.find('/') == std::string::npos ? "in PATH" : "an executable file",
        ": install Debian's librsvg2-bin (deploy/setup.sh does), or write an SVG (-o ",
        options.output_path.substr(0, options.output_path.size() - 4), ".svg)"));
  }
  return absl::OkStatus();
}

int RunPlot(const std::string& job_id, const PlotOptions& options, JobClient& client,
            const CommandEnvironment& env) {
  if (absl::Status valid = CheckPlotOptions(options); !valid.ok()) {
    *env.err << "error: " << valid.message() << "\n";
    return valid.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = client.GetJobMetrics(job_id);
  if (!metrics.ok()) return ReportError(metrics.status(), "cannot get metrics of " + job_id, env);
  if (metrics->points_size() == 0) *env.err << "job " << job_id << " has no step metrics yet\n";
  const std::string svg = MetricsSvg(*metrics, Title(job_id, *metrics));

  if (Extension(options.output_path) == ".png") {
    if (absl::Status written = WritePng(options.rsvg_convert, options.output_path, svg);
        !written.ok()) {
      *env.err << "error: cannot write " << options.output_path << ": " << written.message()
               << "\n";
      return kExitFailure;
    }
  } else if (const int error = WriteFileAtomically(options.output_path, svg); error != 0) {
    *env.err << "error: cannot write " << options.output_path << ": " << std::strerror(error)
             << "\n";
    return kExitFailure;
  }
  std::vector<uint32_t> ranks;
  for (const v1::MetricsPoint& point : metrics->points()) ranks.push_back(point.rank());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (env.json) {
    return PrintJsonFields({{"job_id", job_id},
                            {"charts", absl::StrCat(PlotPanelIds().size())},
                            {"ranks", absl::StrCat(ranks.size())},
                            {"wrote", options.output_path}},
                           env);
  }
  *env.out << "wrote " << PlotPanelIds().size() << " charts of " << ranks.size()
           << (ranks.size() == 1 ? " rank" : " ranks") << " (" << Title(job_id, *metrics) << ") to "
           << options.output_path << "\n";
  return kExitOk;
}

}  // namespace ringleader
