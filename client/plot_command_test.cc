// `ringleader plot` against a gMock client: the SVG written atomically, a PNG converted by
// Debian's rsvg-convert (librsvg2-bin; this test fails without it), a missing or failing
// converter, bad -o values refused before connecting, an unknown job.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

using ::testing::HasSubstr;
using ::testing::Return;
using ::testing::StrictMock;

constexpr char kRsvgConvert[] = "/usr/bin/rsvg-convert";

v1::GetJobMetricsResponse Metrics() {
  v1::GetJobMetricsResponse metrics;
  metrics.set_job_id("job-000001");
  metrics.set_generation(1);
  for (uint64_t step = 1; step <= 3; ++step) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      v1::MetricsPoint* point = metrics.add_points();
      point->set_step(step);
      point->set_rank(rank);
      point->set_loss(1.0 / static_cast<double>(step));
      point->set_local_grad_norm(1 + rank);
      point->set_synced_grad_norm(1.5);
      point->set_step_ms(4);
      point->set_samples_per_second(16000);
    }
  }
  return metrics;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class PlotCommandTest : public ::testing::Test {
 protected:
  PlotCommandTest() {
    env_.out = &out_;
    env_.default_tls_dir = "certs";  // as $RINGLEADER_TLS_DIR would give it
    env_.err = &err_;
    env_.clock = &clock_;
    env_.sleep = [](absl::Duration) {};
    dir_ = fs::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  // Only the output file itself is left in the directory (no temporary file).
  std::vector<std::string> DirectoryEntries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  int Cli(const std::vector<std::string>& args) {
    return RunCli(args, env_, [this](const ConnectOptions&) {
      ++connects_;
      return std::make_unique<StrictMock<MockJobClient>>();
    });
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  CommandEnvironment env_;
  fs::path dir_;
  int connects_ = 0;
};

TEST_F(PlotCommandTest, WritesTheSvgWithALinePerRankAndPanel) {
  EXPECT_CALL(client_, GetJobMetrics("job-000001")).WillOnce(Return(Metrics()));
  const std::string path = (dir_ / "charts.svg").string();
  ASSERT_EQ(RunPlot("job-000001", PlotOptions{path}, client_, env_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), absl::StrCat("wrote 5 charts of 2 ranks (job-000001 \xC2\xB7 generation "
                                     "1 \xC2\xB7 steps 1..3) to ",
                                     path, "\n"));
  const std::string svg = ReadFile(path);
  EXPECT_TRUE(absl::StartsWith(svg, "<?xml")) << svg.substr(0, 100);
  // 2 ranks x (loss, synced and local grad norm, step time, samples/s); no drift measured: its
  // panel says so instead.
  EXPECT_EQ(Count(svg, "<polyline "), 2 * 5);
  EXPECT_EQ(Count(svg, "data-panel=\"drift\" data-rank"), 0);
  EXPECT_THAT(svg, HasSubstr("no drift measured yet"));
  EXPECT_THAT(DirectoryEntries(), ::testing::ElementsAre("charts.svg"));
}

TEST_F(PlotCommandTest, WritesAPngThroughRsvgConvert) {
  ASSERT_EQ(access(kRsvgConvert, X_OK), 0)
      << kRsvgConvert << " is missing: install Debian's librsvg2-bin (deploy/setup.sh)";
  EXPECT_CALL(client_, GetJobMetrics("job-000001")).WillOnce(Return(Metrics()));
  const std::string path = (dir_ / "charts.PNG").string();
  PlotOptions options{path, kRsvgConvert};
  ASSERT_EQ(RunPlot("job-000001", options, client_, env_), kExitOk) << err_.str();
  const std::string png = ReadFile(path);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_THAT(DirectoryEntries(), ::testing::ElementsAre("charts.PNG"));
}

TEST_F(PlotCommandTest, APngWithoutTheConverterIsRefusedBeforeAnyCall) {
  const std::string path = (dir_ / "charts.png").string();
  PlotOptions options{path, (dir_ / "no-such-rsvg-convert").string()};
  EXPECT_EQ(RunPlot("job-000001", options, client_, env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("-o/--output: '" + path + "'"));
  EXPECT_THAT(err_.str(), HasSubstr("install Debian's librsvg2-bin"));
  EXPECT_THAT(err_.str(), HasSubstr("(-o " + (dir_ / "charts").string() + ".svg)"));
  options.rsvg_convert = "no-such-rsvg-convert-in-path";
  EXPECT_EQ(CheckPlotOptions(options).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(CheckPlotOptions(options).message(), HasSubstr("which is not in PATH"));
  EXPECT_TRUE(DirectoryEntries().empty());
}

TEST_F(PlotCommandTest, AFailingConverterLeavesNoFileBehind) {
  EXPECT_CALL(client_, GetJobMetrics("job-000001")).WillOnce(Return(Metrics()));
  const std::string path = (dir_ / "charts.png").string();
  PlotOptions options{path, "/bin/false"};
  EXPECT_EQ(RunPlot("job-000001", options, client_, env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("cannot write " + path + ": /bin/false exited with code 1"));
  EXPECT_TRUE(DirectoryEntries().empty());
}

TEST_F(PlotCommandTest, AnUnknownJobIsNamed) {
  EXPECT_CALL(client_, GetJobMetrics("job-000009"))
      .WillOnce(Return(absl::NotFoundError("unknown job job-000009")));
  EXPECT_EQ(RunPlot("job-000009", PlotOptions{(dir_ / "x.svg").string()}, client_, env_),
            kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("cannot get metrics of job-000009: unknown job job-000009"));
  EXPECT_TRUE(DirectoryEntries().empty());
}

TEST_F(PlotCommandTest, TheCommandLineNeedsAnSvgOrPngOutput) {
  EXPECT_EQ(Cli({"plot", "j-1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("plot: -o FILE (--output) is required"));
  err_.str("");
  EXPECT_EQ(Cli({"plot", "j-1", "-o", "charts.pdf"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("-o/--output: 'charts.pdf': plot writes .svg or .png files "
                                    "(got '.pdf'); e.g. -o charts.svg"));
  err_.str("");
  EXPECT_EQ(Cli({"plot", "j-1", "--output=charts"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("(got no extension)"));
  err_.str("");
  EXPECT_EQ(Cli({"plot", "-o", "x.svg"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("'plot' takes JOB, got none"));
  EXPECT_EQ(connects_, 0);

  out_.str("");
  EXPECT_EQ(Cli({"plot", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), ::testing::StartsWith("usage: ringleader plot [flags] JOB\n"));
  EXPECT_THAT(out_.str(), HasSubstr("rsvg-convert"));
  out_.str("");
  EXPECT_EQ(Cli({"--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("plot "));
}

}  // namespace
}  // namespace ringleader
