// `ringleader metrics` (RunMetrics) against a gMock JobClient: exact CSV, JSON that parses
// back to the response, atomic -o output with its summary line, and the error exits.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::UnorderedElementsAre;

constexpr char kHeader[] =
    "step,rank,loss,local_grad_norm,synced_grad_norm,drift,step_ms,compute_ms,comm_ms,"
    "samples_per_second\n";

v1::MetricsPoint Point(uint64_t step, uint32_t rank, double loss, double local, double synced,
                       bool has_drift, double drift, double step_ms, double compute_ms,
                       double comm_ms, double samples_per_second) {
  v1::MetricsPoint point;
  point.set_step(step);
  point.set_rank(rank);
  point.set_loss(loss);
  point.set_local_grad_norm(local);
  point.set_synced_grad_norm(synced);
  point.set_has_drift(has_drift);
  point.set_drift(drift);
  point.set_step_ms(step_ms);
  point.set_compute_ms(compute_ms);
  point.set_comm_ms(comm_ms);
  point.set_samples_per_second(samples_per_second);
  return point;
}

// Two steps x two ranks; drift measured at step 2 only. 0.1 + 0.2 needs 17 digits, 1/3 16.
v1::GetJobMetricsResponse TwoStepsTwoRanks() {
  v1::GetJobMetricsResponse response;
  response.set_job_id("j-1");
  response.set_generation(3);
  response.set_full_resolution_steps(1000);
  response.set_decimation_stride(1);
  *response.add_points() = Point(1, 0, 0.1, 1.25, 0.1 + 0.2, false, 0, 12.5, 8, 3.25, 5120);
  *response.add_points() = Point(1, 1, 2.25, 1.75, 0.1 + 0.2, false, 0, 13, 8.5, 3, 4923.25);
  *response.add_points() = Point(2, 0, 2, 1, 1, true, 0, 12, 7.5, 4, 5333.5);
  *response.add_points() = Point(2, 1, 1.5, 1.0 / 3, 1, true, 1e-7, 14, 9, 4.5, 4571.75);
  return response;
}

constexpr char kTwoStepsTwoRanksCsv[] =
    "1,0,0.1,1.25,0.30000000000000004,,12.5,8,3.25,5120\n"
    "1,1,2.25,1.75,0.30000000000000004,,13,8.5,3,4923.25\n"
    "2,0,2,1,1,0,12,7.5,4,5333.5\n"
    "2,1,1.5,0.3333333333333333,1,1e-07,14,9,4.5,4571.75\n";

v1::GetJobMetricsResponse NoPoints() {
  v1::GetJobMetricsResponse response;
  response.set_job_id("j-1");
  response.set_full_resolution_steps(1000);
  response.set_decimation_stride(1);
  return response;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return names;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(handle);
  return names;
}

// A new empty directory for one test.
std::string FreshDirectory(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  mkdir(dir.c_str(), 0755);
  for (const std::string& entry : ListDirectory(dir)) std::remove((dir + "/" + entry).c_str());
  return dir;
}

class MetricsCommandTest : public ::testing::Test {
 protected:
  MetricsCommandTest() {
    env_.out = &out_;
    env_.err = &err_;
    env_.coordinator_address = "10.0.0.1:7070";
  }

  int Run(const MetricsOptions& options, const std::string& job_id = "j-1") {
    return RunMetrics(job_id, options, client_, env_);
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  CommandEnvironment env_;
};

TEST_F(MetricsCommandTest, CsvHasOneRowPerStepAndRankAndDriftOnlyWhereMeasured) {
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(TwoStepsTwoRanks()));
  EXPECT_EQ(Run(MetricsOptions()), kExitOk);
  EXPECT_EQ(out_.str(), std::string(kHeader) + kTwoStepsTwoRanksCsv);
  EXPECT_EQ(err_.str(), "");
}

TEST_F(MetricsCommandTest, CsvNumbersParseBackExactlyAndNonFiniteOnesAreNamed) {
  v1::GetJobMetricsResponse response = NoPoints();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  *response.add_points() = Point(7, 0, nan, inf, -inf, true, 5e-324, 1e300, 123456789.123456789,
                                 -0.0, 2.0 / 3);
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(response));
  EXPECT_EQ(Run(MetricsOptions()), kExitOk);
  EXPECT_EQ(out_.str(), std::string(kHeader) +
                            "7,0,nan,inf,-inf,4.94065645841247e-324,1e+300,"
                            "123456789.12345679,-0,0.6666666666666666\n");
  EXPECT_EQ(std::strtod("123456789.12345679", nullptr), 123456789.123456789);
  EXPECT_EQ(std::strtod("4.94065645841247e-324", nullptr), 5e-324);
}

TEST_F(MetricsCommandTest, JsonIsOneObjectThatParsesBackToTheResponse) {
  const v1::GetJobMetricsResponse response = TwoStepsTwoRanks();
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(response));
  MetricsOptions options;
  options.format = "json";
  EXPECT_EQ(Run(options), kExitOk);
  const std::string text = out_.str();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;  // one line
  EXPECT_EQ(text.front(), '{');
  // Proto field names, and fields at their default value are printed too.
  EXPECT_THAT(text, HasSubstr("\"job_id\":\"j-1\""));
  EXPECT_THAT(text, HasSubstr("\"full_resolution_steps\":1000"));
  EXPECT_THAT(text, HasSubstr("\"has_drift\":false"));
  v1::GetJobMetricsResponse parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &parsed);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, response))
      << parsed.DebugString();
  EXPECT_EQ(parsed.points(0).synced_grad_norm(), 0.1 + 0.2);  // exact, not within a tolerance
  EXPECT_EQ(err_.str(), "");
}

TEST_F(MetricsCommandTest, NoPointsYetPrintsTheHeaderAndANote) {
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(NoPoints()));
  EXPECT_EQ(Run(MetricsOptions()), kExitOk);
  EXPECT_EQ(out_.str(), kHeader);
  EXPECT_EQ(err_.str(), "job j-1 has no step metrics yet\n");
}

TEST_F(MetricsCommandTest, NoPointsYetAsJsonHasAnEmptyPointList) {
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(NoPoints()));
  MetricsOptions options;
  options.format = "json";
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"points\":[]"));
  EXPECT_THAT(out_.str(), HasSubstr("\"generation\":\"0\""));  // uint64: a JSON string
  EXPECT_EQ(err_.str(), "job j-1 has no step metrics yet\n");
}

TEST_F(MetricsCommandTest, OutputFileIsReplacedWholeAndASummaryIsPrinted) {
  const std::string dir = FreshDirectory("metrics_output");
  const std::string path = dir + "/metrics.csv";
  {
    std::ofstream old(path);
    old << "an older export that is longer than the new one will be, to catch a missing "
           "truncation\n"
        << std::string(4096, 'x');
  }
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(TwoStepsTwoRanks()));
  MetricsOptions options;
  options.output_path = path;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(ReadFile(path), std::string(kHeader) + kTwoStepsTwoRanksCsv);
  EXPECT_EQ(out_.str(), "wrote 4 points (steps 1..2, generation 3) to " + path + "\n");
  EXPECT_EQ(err_.str(), "");
  EXPECT_THAT(ListDirectory(dir), UnorderedElementsAre("metrics.csv"));  // no temporary left
}

TEST_F(MetricsCommandTest, OutputFileAsJsonParsesBack) {
  const std::string dir = FreshDirectory("metrics_output_json");
  const std::string path = dir + "/metrics.json";
  const v1::GetJobMetricsResponse response = TwoStepsTwoRanks();
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(response));
  MetricsOptions options;
  options.format = "json";
  options.output_path = path;
  EXPECT_EQ(Run(options), kExitOk);
  v1::GetJobMetricsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(path), &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, response));
  EXPECT_EQ(out_.str(), "wrote 4 points (steps 1..2, generation 3) to " + path + "\n");
}

TEST_F(MetricsCommandTest, UnwritableOutputExitsOneNamingThePathAndTheReason) {
  const std::string path = FreshDirectory("metrics_unwritable") + "/no/such/dir/metrics.csv";
  EXPECT_CALL(client_, GetJobMetrics("j-1")).WillOnce(Return(TwoStepsTwoRanks()));
  MetricsOptions options;
  options.output_path = path;
  EXPECT_EQ(Run(options), kExitFailure);
  EXPECT_EQ(err_.str(), "error: cannot write " + path + ": No such file or directory\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(MetricsCommandTest, UnknownFormatExitsTwoBeforeAnyCall) {
  MetricsOptions options;
  options.format = "xml";
  EXPECT_EQ(Run(options), kExitUsage);  // StrictMock: no GetJobMetrics call
  EXPECT_EQ(err_.str(), "error: --format: expected csv or json, got 'xml'\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(CheckMetricsOptions(options).code(), absl::StatusCode::kInvalidArgument);
  options.format = "json";
  EXPECT_TRUE(CheckMetricsOptions(options).ok());
}

TEST_F(MetricsCommandTest, UnknownJobExitsOneWithTheCoordinatorsMessage) {
  EXPECT_CALL(client_, GetJobMetrics("j-9"))
      .WillOnce(Return(absl::NotFoundError("job j-9 not found")));
  EXPECT_EQ(Run(MetricsOptions(), "j-9"), kExitFailure);
  EXPECT_EQ(err_.str(), "error: cannot get metrics of j-9: job j-9 not found [NOT_FOUND]\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(MetricsCommandTest, UnreachableCoordinatorGetsTheHint) {
  EXPECT_CALL(client_, GetJobMetrics("j-1"))
      .WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(Run(MetricsOptions()), kExitUnreachable);
  EXPECT_THAT(err_.str(), HasSubstr("connection refused [UNAVAILABLE]"));
  EXPECT_THAT(err_.str(), HasSubstr("is the coordinator running at 10.0.0.1:7070?"));
}

}  // namespace
}  // namespace ringleader
