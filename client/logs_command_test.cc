// `ringleader logs` (RunLogs, and its flags through RunCli) against a gMock JobClient: raw and
// prefixed output, partial lines, bytes not kept, --tail, --follow to the end of the attempt and
// on to the next generation, retries, errors.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::Return;
using ::testing::StrictMock;

v1::LogChunk Chunk(uint32_t rank, uint64_t offset, const std::string& data, uint64_t skipped = 0) {
  v1::LogChunk chunk;
  chunk.set_rank(rank);
  chunk.set_offset(offset);
  chunk.set_data(data);
  chunk.set_skipped(skipped);
  return chunk;
}

v1::GetLogsResponse Answer(uint64_t generation, const std::vector<v1::LogChunk>& chunks,
                           bool attempt_over = false, bool job_over = false) {
  v1::GetLogsResponse answer;
  answer.set_generation(generation);
  for (const v1::LogChunk& chunk : chunks) *answer.add_chunks() = chunk;
  answer.set_attempt_over(attempt_over);
  answer.set_job_over(job_over);
  return answer;
}

v1::WatchJobResponse Watched(uint64_t generation, v1::JobState state, uint64_t version) {
  v1::WatchJobResponse watched;
  watched.mutable_job()->set_generation(generation);
  watched.mutable_job()->set_state(state);
  watched.mutable_job()->set_version(version);
  return watched;
}

// "gen G rank R wait W after r:o,r:o" for a request.
std::string Describe(const v1::GetLogsRequest& request) {
  std::string text = "gen " + std::to_string(request.generation());
  if (request.has_rank()) text += " rank " + std::to_string(request.rank());
  text += " wait " + std::to_string(request.wait_timeout_ms());
  if (request.after_size() > 0) text += " after";
  for (const v1::LogCursor& cursor : request.after()) {
    text += " " + std::to_string(cursor.rank()) + ":" + std::to_string(cursor.offset());
  }
  return text;
}

class LogsCommandTest : public ::testing::Test {
 protected:
  LogsCommandTest() {
    env_.out = &out_;
    env_.default_tls_dir = "certs";  // as $RINGLEADER_TLS_DIR would give it
    env_.err = &err_;
    env_.clock = &clock_;
    env_.sleep = [this](absl::Duration d) { slept_.push_back(d); };
  }

  // The next GetLogs calls answer `answers` in order; each request is recorded.
  void ExpectLogs(const std::vector<absl::StatusOr<v1::GetLogsResponse>>& answers) {
    auto& expectation = EXPECT_CALL(client_, GetLogs(_)).Times(answers.size());
    for (const auto& answer : answers) {
      expectation.WillOnce(Invoke([this, answer](const v1::GetLogsRequest& request) {
        EXPECT_EQ(request.job_id(), "j-1");
        requests_.push_back(Describe(request));
        return answer;
      }));
    }
  }

  int Run(const LogsOptions& options) { return RunLogs("j-1", options, client_, env_); }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  CommandEnvironment env_;
  std::vector<std::string> requests_;
  std::vector<absl::Duration> slept_;
};

TEST_F(LogsCommandTest, OneRankPrintsItsRawOutput) {
  ExpectLogs({Answer(2, {Chunk(1, 0, "loss 0.5\nstep")}), Answer(2, {})});
  LogsOptions options;
  options.rank = 1;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(out_.str(), "loss 0.5\nstep");  // raw: nothing added
  EXPECT_THAT(requests_,
              testing::ElementsAre("gen 0 rank 1 wait 0", "gen 2 rank 1 wait 0 after 1:13"));
}

TEST_F(LogsCommandTest, SeveralRanksPrefixEveryLineAndKeepPartialLinesPerRank) {
  ExpectLogs({Answer(1, {Chunk(0, 0, "a1\na"), Chunk(1, 0, "b1\n")}),
              Answer(1, {Chunk(0, 4, "2\n"), Chunk(1, 3, "b2")}), Answer(1, {})});
  EXPECT_EQ(Run(LogsOptions()), kExitOk);
  EXPECT_EQ(out_.str(), "[rank 0] a1\n[rank 1] b1\n[rank 0] a2\n[rank 1] b2\n");
  EXPECT_EQ(requests_[1], "gen 1 wait 0 after 0:4 1:3");
}

TEST_F(LogsCommandTest, OutputNoLongerKeptIsSaid) {
  // Read for the first time from byte 100: the first 100 are gone; then a gap of 48.
  ExpectLogs(
      {Answer(1, {Chunk(0, 100, "x\n")}), Answer(1, {Chunk(0, 150, "y\n", 48)}), Answer(1, {})});
  EXPECT_EQ(Run(LogsOptions()), kExitOk);
  EXPECT_EQ(out_.str(),
            "[rank 0: 100 bytes not kept]\n[rank 0] x\n[rank 0: 48 bytes not kept]\n"
            "[rank 0] y\n");
}

TEST_F(LogsCommandTest, TailPrintsTheLastLinesOfEachRank) {
  ExpectLogs({Answer(1, {Chunk(0, 10, "1\n2\n3\n"), Chunk(1, 0, "a\nb\nc")}),
              Answer(1, {Chunk(0, 16, "4\n")}), Answer(1, {})});
  LogsOptions options;
  options.tail = 2;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(out_.str(), "[rank 0] 3\n[rank 0] 4\n[rank 1] b\n[rank 1] c\n");
}

TEST_F(LogsCommandTest, FollowReadsUntilTheAttemptAndTheJobAreOver) {
  ExpectLogs({Answer(1, {Chunk(0, 0, "start\n")}), Answer(1, {}), Answer(1, {Chunk(0, 6, "end\n")}),
              Answer(1, {}, true, true)});
  LogsOptions options;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(out_.str(), "[rank 0] start\n[rank 0] end\n");
  EXPECT_THAT(requests_,
              testing::ElementsAre("gen 0 wait 0", "gen 1 wait 0 after 0:6",
                                   "gen 1 wait 10000 after 0:6", "gen 1 wait 10000 after 0:10"));
}

TEST_F(LogsCommandTest, FollowGoesOnToTheJobsNextGeneration) {
  ExpectLogs({Answer(1, {Chunk(0, 0, "try 1\npartial")}), Answer(1, {}, /*attempt_over=*/true),
              Answer(2, {Chunk(0, 0, "try 2\n")}), Answer(2, {}, true, true)});
  EXPECT_CALL(client_, Watch("j-1", 0, absl::Seconds(10)))
      .WillOnce(Return(Watched(1, v1::JOB_STATE_QUEUED, 5)));
  EXPECT_CALL(client_, Watch("j-1", 5, absl::Seconds(10)))
      .WillOnce(Return(Watched(2, v1::JOB_STATE_RENDEZVOUS, 6)));
  LogsOptions options;
  options.rank = 0;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(out_.str(), "try 1\npartial\n--- generation 2 ---\ntry 2\n");
  EXPECT_EQ(requests_[2], "gen 2 rank 0 wait 10000");  // the new attempt from its start
}

TEST_F(LogsCommandTest, FollowingOneGenerationEndsWithItsAttempt) {
  ExpectLogs({Answer(1, {}, /*attempt_over=*/true)});  // no Watch: the strict mock checks
  LogsOptions options;
  options.generation = 1;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(requests_[0], "gen 1 wait 0");
}

TEST_F(LogsCommandTest, FollowingAJobThatHasNotRunWaitsForItsFirstAttempt) {
  ExpectLogs({Answer(0, {}), Answer(1, {Chunk(0, 0, "hi\n")}), Answer(1, {}, true, true)});
  EXPECT_CALL(client_, Watch("j-1", 0, _))
      .WillOnce(Return(Watched(1, v1::JOB_STATE_RENDEZVOUS, 3)));
  LogsOptions options;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_EQ(out_.str(), "[rank 0] hi\n");
}

TEST_F(LogsCommandTest, FollowEndsWhenTheJobEndsWithoutAnotherAttempt) {
  ExpectLogs({Answer(1, {}, /*attempt_over=*/true)});
  EXPECT_CALL(client_, Watch("j-1", 0, _)).WillOnce(Return(Watched(1, v1::JOB_STATE_CANCELLED, 9)));
  LogsOptions options;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
}

TEST_F(LogsCommandTest, FollowRetriesAnUnreachableCoordinator) {
  ExpectLogs(
      {Answer(1, {}), absl::UnavailableError("connection refused"), Answer(1, {}, true, true)});
  LogsOptions options;
  options.follow = true;
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("coordinator not answering (connection refused); retry 1/8"));
  EXPECT_THAT(slept_, testing::ElementsAre(absl::Milliseconds(500)));
}

TEST_F(LogsCommandTest, ErrorsAreReportedWithTheirExitCodes) {
  ExpectLogs({absl::NotFoundError("unknown job j-1")});
  EXPECT_EQ(Run(LogsOptions()), kExitFailure);
  EXPECT_EQ(err_.str(), "error: cannot get the logs of job j-1: unknown job j-1 [NOT_FOUND]\n");
  err_.str("");
  ExpectLogs({absl::InvalidArgumentError("rank 9 is out of range")});
  LogsOptions options;
  options.rank = 9;
  EXPECT_EQ(Run(options), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("rank 9 is out of range"));
}

// Through the command line: flags become the request; bad values name their flag.
class LogsCliTest : public LogsCommandTest {
 protected:
  int Cli(std::vector<std::string> args) {
    return RunCli(args, env_, [this](const ConnectOptions&) {
      ++connects_;
      auto client = std::make_unique<StrictMock<MockJobClient>>();
      EXPECT_CALL(*client, GetLogs(_))
          .WillRepeatedly(Invoke([this](const v1::GetLogsRequest& request) {
            requests_.push_back(Describe(request));
            return absl::StatusOr<v1::GetLogsResponse>(Answer(2, {}));
          }));
      return client;
    });
  }
  int connects_ = 0;
};

TEST_F(LogsCliTest, FlagsBecomeTheRequest) {
  EXPECT_EQ(Cli({"logs", "j-1", "--rank", "3", "--generation=2", "--tail", "5"}), kExitOk);
  EXPECT_THAT(requests_, testing::ElementsAre("gen 2 rank 3 wait 0"));
}

TEST_F(LogsCliTest, BadFlagValuesNameTheFlag) {
  EXPECT_EQ(Cli({"logs", "j-1", "--rank", "x"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--rank: expected a rank number (0, 1, ...), got 'x'"));
  EXPECT_EQ(Cli({"logs", "j-1", "--tail", "-1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--tail: expected a number of lines (0 or more), got '-1'"));
  EXPECT_EQ(Cli({"logs", "j-1", "--generation", "0"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--generation: expected a generation number (1, 2, ...)"));
  EXPECT_EQ(Cli({"logs", "j-1", "--follow=yes"}), kExitUsage);
  EXPECT_EQ(Cli({"logs", "j-1", "--folow"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--follow"));  // did you mean
  EXPECT_EQ(connects_, 0) << "connected despite a bad command line";
}

}  // namespace
}  // namespace ringleader
