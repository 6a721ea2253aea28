// The CLI for scripts: --json output (protobuf's JSON mapping), list --state/--limit, and the
// exit code for an unreachable coordinator.
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Return;
using ::testing::StrictMock;

v1::JobStatus Job(const std::string& id, v1::JobState state, int64_t submitted) {
  v1::JobStatus job;
  job.set_job_id(id);
  job.set_state(state);
  job.set_submit_time_unix_ms(submitted);
  return job;
}

v1::ListJobsResponse ThreeJobs() {
  v1::ListJobsResponse response;
  *response.add_jobs() = Job("job-000001", v1::JOB_STATE_SUCCEEDED, 1000);
  *response.add_jobs() = Job("job-000002", v1::JOB_STATE_FAILED, 2000);
  *response.add_jobs() = Job("job-000003", v1::JOB_STATE_RUNNING, 3000);
  return response;
}

class ScriptOutputTest : public ::testing::Test {
 protected:
  ScriptOutputTest() {
    env_.out = &out_;
    env_.default_tls_dir = "certs";  // as $RINGLEADER_TLS_DIR would give it
    env_.err = &err_;
    env_.coordinator_address = "10.0.0.1:7070";
  }
  // The jobs `list` printed as JSON, parsed back.
  std::vector<std::string> ListedIds() {
    v1::ListJobsResponse parsed;
    const auto status = google::protobuf::util::JsonStringToMessage(out_.str(), &parsed);
    EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << out_.str();
    std::vector<std::string> ids;
    for (const v1::JobStatus& job : parsed.jobs()) ids.push_back(job.job_id());
    return ids;
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  CommandEnvironment env_;
};

TEST_F(ScriptOutputTest, ListFiltersByStateAndLimitsToTheNewest) {
  env_.json = true;
  EXPECT_CALL(client_, List(false)).WillRepeatedly(Return(ThreeJobs()));
  ListOptions options;
  options.states = {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_RUNNING};
  EXPECT_EQ(RunList(options, client_, env_), kExitOk);
  EXPECT_THAT(ListedIds(), ::testing::ElementsAre("job-000001", "job-000003"));
  out_.str("");
  ListOptions newest;
  newest.limit = 2;
  EXPECT_EQ(RunList(newest, client_, env_), kExitOk);
  EXPECT_THAT(ListedIds(), ::testing::ElementsAre("job-000002", "job-000003"));
}

TEST_F(ScriptOutputTest, JsonUsesProtoFieldNames) {
  env_.json = true;
  v1::GetJobResponse response;
  *response.mutable_job() = Job("job-000009", v1::JOB_STATE_FAILED, 5);
  EXPECT_CALL(client_, Get("job-000009")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("job-000009", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"job_id\": \"job-000009\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"state\": \"JOB_STATE_FAILED\""));
}

TEST_F(ScriptOutputTest, AnUnreachableCoordinatorExitsWithThree) {
  EXPECT_CALL(client_, List(false)).WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(RunList(ListOptions(), client_, env_), kExitUnreachable);
  EXPECT_THAT(err_.str(), HasSubstr("is the coordinator running at 10.0.0.1:7070"));
  EXPECT_CALL(client_, Get("job-1")).WillOnce(Return(absl::DeadlineExceededError("slow")));
  EXPECT_EQ(RunStatus("job-1", client_, env_), kExitUnreachable);
  EXPECT_CALL(client_, Get("job-2")).WillOnce(Return(absl::NotFoundError("no such job")));
  EXPECT_EQ(RunStatus("job-2", client_, env_), kExitFailure);
}

TEST_F(ScriptOutputTest, WatchUnderJsonPrintsOneLinePerChangeAndTheExitCodeOfTheEnd) {
  env_.json = true;
  env_.sleep = [](absl::Duration) {};
  v1::WatchJobResponse running;
  *running.mutable_job() = Job("job-000004", v1::JOB_STATE_RUNNING, 5);
  running.mutable_job()->set_version(3);
  v1::WatchJobResponse failed = running;
  failed.mutable_job()->set_state(v1::JOB_STATE_FAILED);
  failed.mutable_job()->set_version(4);
  EXPECT_CALL(client_, Watch("job-000004", ::testing::_, ::testing::_))
      .WillOnce(Return(running))
      .WillOnce(Return(absl::UnavailableError("restarting")))  // retried; said on stderr
      .WillOnce(Return(failed));
  WatchOptions options;
  EXPECT_EQ(RunWatch("job-000004", options, client_, env_), kExitFailure);
  std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  std::vector<v1::JobState> states;
  for (const std::string& line : lines) {
    v1::WatchJobResponse parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
    states.push_back(parsed.job().state());
  }
  EXPECT_THAT(states, ::testing::ElementsAre(v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED));
  EXPECT_THAT(err_.str(), HasSubstr("coordinator not answering"));
}

TEST_F(ScriptOutputTest, LogsUnderJsonPrintEachAnswerAsALineWithTheBytesInBase64) {
  env_.json = true;
  v1::GetLogsResponse answer;
  answer.set_generation(1);
  answer.set_attempt_over(true);
  v1::LogChunk* chunk = answer.add_chunks();
  chunk->set_rank(1);
  chunk->set_data("epoch 0 done\n");
  v1::GetLogsResponse empty;
  empty.set_generation(1);
  empty.set_attempt_over(true);
  EXPECT_CALL(client_, GetLogs(::testing::_)).WillOnce(Return(answer)).WillOnce(Return(empty));
  LogsOptions options;
  EXPECT_EQ(RunLogs("job-000004", options, client_, env_), kExitOk);
  v1::GetLogsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &parsed).ok()) << out_.str();
  ASSERT_EQ(parsed.chunks_size(), 1);
  EXPECT_EQ(parsed.chunks(0).data(), "epoch 0 done\n");
  EXPECT_THAT(out_.str(), Not(HasSubstr("rank 1 |")));  // no text lines mixed in
}

TEST_F(ScriptOutputTest, OutputJsonOnTheCommandLineSelectsTheJsonMapping) {
  auto connect_with = [](v1::JobStatus job) {
    return [job](const ConnectOptions&) -> std::unique_ptr<JobClient> {
      auto client = std::make_unique<StrictMock<MockJobClient>>();
      v1::GetJobResponse response;
      *response.mutable_job() = job;
      EXPECT_CALL(*client, Get(job.job_id())).WillOnce(Return(response));
      return client;
    };
  };
  const v1::JobStatus job = Job("job-000007", v1::JOB_STATE_RUNNING, 5);
  EXPECT_EQ(RunCli({"--output", "json", "status", "job-000007"}, env_, connect_with(job)),
            kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"state\": \"JOB_STATE_RUNNING\""));
  out_.str("");
  EXPECT_EQ(RunCli({"status", "job-000007", "--output=text"}, env_, connect_with(job)), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("state        RUNNING"));
}

TEST_F(ScriptOutputTest, OutputTakesTextOrJsonAndNothingElse) {
  int connects = 0;
  auto connect = [&](const ConnectOptions&) -> std::unique_ptr<JobClient> {
    ++connects;
    return nullptr;
  };
  EXPECT_EQ(RunCli({"--output", "yaml", "list"}, env_, connect), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--output: expected text or json, got 'yaml'"));
  EXPECT_EQ(connects, 0);
}

TEST_F(ScriptOutputTest, StateNamesAreCheckedBeforeConnecting) {
  EXPECT_EQ(*ParseJobStateName("Running"), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(std::string(ParseJobStateName("done").status().message()),
              HasSubstr("--state: unknown job state 'done' (expected queued, rendezvous"));
  int connects = 0;
  auto connect = [&](const ConnectOptions&) -> std::unique_ptr<JobClient> {
    ++connects;
    return nullptr;
  };
  EXPECT_EQ(RunCli({"list", "--state", "done"}, env_, connect), kExitUsage);
  EXPECT_EQ(RunCli({"list", "--limit", "0"}, env_, connect), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--limit: expected a number of jobs (1 or more), got '0'"));
  EXPECT_EQ(connects, 0);
}

}  // namespace
}  // namespace ringleader
