#include "client/format.h"

#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace ringleader {

std::string WaitingReason(const v1::JobStatus& job) {
  if (job.state() != v1::JOB_STATE_QUEUED) return "";
  std::string reason(absl::StripAsciiWhitespace(job.queued_reason()));
  for (char& c : reason) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return reason;
}

std::string FormatUnixMillis(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string FormatAgeMillis(int64_t age_ms) {
  if (age_ms < 0) return "-";
  if (age_ms < 1000) return absl::StrCat(age_ms, "ms");
  if (age_ms < 60'000) return absl::StrFormat("%.1fs", age_ms / 1000.0);
  const int64_t seconds = age_ms / 1000;
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  return absl::StrFormat("%dh%02dm", seconds / 3600, (seconds / 60) % 60);
}

std::string FormatNumber(double value, int digits) {
  return absl::StrFormat("%.*g", digits, value);
}

std::string SummarizeSpec(const v1::JobSpec& spec) {
  if (spec.command_size() > 0) {
    std::vector<std::string> args;
    for (const std::string& arg : spec.command()) {
      args.push_back(arg.find_first_of(" \t'\"") == std::string::npos ? arg
                                                                      : absl::StrCat("'", arg, "'"));
    }
    std::string text = absl::StrCat("command `", absl::StrJoin(args, " "), "`, ",
                                    spec.world_size(), " ranks, ", spec.backend());
    if (!spec.workdir().empty()) absl::StrAppend(&text, ", in ", spec.workdir());
    return text;
  }
  std::vector<std::string> layers;
  for (uint32_t width : spec.model().layers()) layers.push_back(absl::StrCat(width));
  std::string text = absl::StrCat(
      spec.model().kind(), " ", absl::StrJoin(layers, "-"), ", ", spec.optimizer().kind(), " lr ",
      FormatNumber(spec.optimizer().learning_rate()), " momentum ",
      FormatNumber(spec.optimizer().momentum()), ", batch ", spec.batch_size(), " x ",
      spec.world_size(), " ranks, ", spec.epochs(), " epochs");
  if (spec.max_steps() > 0) absl::StrAppend(&text, " (max ", spec.max_steps(), " steps)");
  absl::StrAppend(&text, ", ", spec.backend(), ", ", spec.data().dataset());
  return text;
}

std::string FormatDevice(const v1::Device& device) {
  std::string text = absl::StrCat(device.kind(), ":", device.index());
  if (!device.name().empty()) absl::StrAppend(&text, " (", device.name(), ")");
  return text;
}

std::string FormatStatus(const absl::Status& status) {
  return absl::StrCat(status.message(), " [", absl::StatusCodeToString(status.code()), "]");
}

}  // namespace ringleader
