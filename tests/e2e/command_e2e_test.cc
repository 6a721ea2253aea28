// End to end, command jobs with /bin/sh as the user's program: the real coordinator, daemons and
// rank processes (as launchers). What a PyTorch script gets (torchrun's environment, rank 0's
// MASTER_PORT relayed to every rank), and how a failing command fails the job.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(60);

v1::JobSpec ShellJob(const std::string& name, const std::string& script) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_world_size(2);
  spec.set_max_restarts(0);
  spec.add_command("sh");
  spec.add_command("-c");
  spec.add_command(script);
  return spec;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class CommandE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() { StartCluster(ClusterOptions()); }
};

TEST_F(CommandE2eTest, EveryRankGetsTorchrunsEnvironmentWithOneMasterPort) {
  const fs::path out = fs::path(cluster_->dir()) / "env-out";
  fs::create_directories(out);
  v1::JobSpec spec = ShellJob(
      "command-env-e2e",
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
      "$MASTER_PORT $RINGLEADER_GENERATION $TORCHELASTIC_RESTART_COUNT $OMP_NUM_THREADS $GREETING"
      "\" > \"$RANK.txt\"");
  spec.set_workdir(out.string());
  (*spec.mutable_env())["GREETING"] = "hello";
  const JobHistory history = RunJob(spec, kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  const std::string rank0 = ReadFile(out / "0.txt");
  const std::string rank1 = ReadFile(out / "1.txt");
  EXPECT_THAT(rank0, ::testing::StartsWith("0 2 0 2 0 127.0.0.1 "));
  EXPECT_THAT(rank1, ::testing::StartsWith("1 2 1 2 0 127.0.0.1 "));
  EXPECT_THAT(rank0, HasSubstr(" 1 0 1 hello"));
  // Both ranks got the port rank 0 reserved.
  const std::string port0 = rank0.substr(0, rank0.find(" 1 0 1"));
  const std::string port1 = rank1.substr(0, rank1.find(" 1 0 1"));
  EXPECT_EQ(port0.substr(port0.rfind(' ')), port1.substr(port1.rfind(' ')));
}

TEST_F(CommandE2eTest, AFailingCommandFailsTheJobQuotingItsStderr) {
  const JobHistory history = RunJob(
      ShellJob("command-fails-e2e",
               "if [ \"$RANK\" = 1 ]; then echo 'Traceback (most recent call last):' >&2; "
               "echo 'ValueError: injected failure on rank 1' >&2; exit 3; fi; sleep 30"),
      kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(history.final),
              AllOf(HasSubstr("rank 1"),
                    HasSubstr("command exited with code 3: ValueError: injected failure on rank 1")));
  // Rank 0 (sleeping) was stopped with the attempt: the workers are free again.
  EXPECT_TRUE(cluster_->WaitForIdleWorkers(2, absl::Seconds(20)).ok()) << cluster_->LogTails();
}

TEST_F(CommandE2eTest, AProgramMissingOnTheWorkerIsNotRestarted) {
  v1::JobSpec spec = ShellJob("command-missing-e2e", "true");
  spec.set_command(0, "no-such-program-xyz");
  spec.set_max_restarts(3);
  const JobHistory history = RunJob(spec, kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(history.final),
              HasSubstr("command[0]: 'no-such-program-xyz' was not found in PATH"));
  EXPECT_EQ(history.final.generation(), 1u) << "a job error is not restarted";
}

TEST_F(CommandE2eTest, LogsShowEveryRanksOutputThroughTheCoordinator) {
  const JobHistory history = RunJob(
      ShellJob("command-logs-e2e", "echo \"hello from rank $RANK\"; echo \"bye $RANK\" >&2"),
      kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  const std::string& job = history.final.job_id();
  // The daemons ship a rank's last lines right after it exits: --follow waits for them.
  const CliResult all = cluster_->RunCli({"logs", job, "--follow"}, absl::Seconds(30));
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_THAT(all.output, AllOf(HasSubstr("[rank 0] hello from rank 0"),
                                HasSubstr("[rank 1] hello from rank 1"),
                                HasSubstr("[rank 1] bye 1")));
  const CliResult one = cluster_->RunCli({"logs", job, "--rank", "1", "--tail", "1"},
                                         absl::Seconds(30));
  EXPECT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("bye 1"));
  EXPECT_THAT(one.output, ::testing::Not(HasSubstr("rank 0")));
}

TEST_F(CommandE2eTest, ReservedEnvIsRefusedAtSubmit) {
  v1::JobSpec spec = ShellJob("command-reserved-e2e", "true");
  (*spec.mutable_env())["WORLD_SIZE"] = "8";
  absl::StatusOr<std::string> submitted = cluster_->Submit(spec);
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(submitted.status().message()), HasSubstr("env.WORLD_SIZE: set by ringleader"));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
