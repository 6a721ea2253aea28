// RunCommandRank against the fake coordinator, with /bin/sh scripts as the user's command.
#include "worker/launcher/command_rank.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/coordinator_client/fake_coordinator.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TmpDir(const std::string& name) {
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) / name;
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

v1::Assignment ShellJob(const std::string& script, uint32_t rank = 0, uint32_t world = 1) {
  v1::Assignment a;
  a.set_job_id("job-000001");
  a.set_generation(1);
  a.set_rank(rank);
  a.set_world_size(world);
  a.mutable_spec()->set_world_size(world);
  a.mutable_spec()->add_command("sh");
  a.mutable_spec()->add_command("-c");
  a.mutable_spec()->add_command(script);
  return a;
}

class CommandRankTest : public ::testing::Test {
 protected:
  CommandRankOptions Options(const std::string& dir) {
    CommandRankOptions options;
    options.worker_id = "w-test";
    options.coordinator_address = "127.0.0.1:1";
    options.default_workdir = dir;
    options.inherited_env = {"PATH=/usr/bin:/bin"};
    options.keepalive_interval = absl::Milliseconds(20);
    options.stop_poll_interval = absl::Milliseconds(20);
    options.coordinator_grace = absl::ZeroDuration();
    options.stderr_tee_fd = -1;
    options.store = &store_;
    return options;
  }
  InMemoryKeyValueStore store_;
};

TEST_F(CommandRankTest, RunsTheCommandWithTorchrunsEnvironmentAndReportsSuccess) {
  const std::string dir = TmpDir("success");
  const v1::Assignment a =
      ShellJob("echo \"$RANK/$WORLD_SIZE $MASTER_ADDR $MASTER_PORT $RINGLEADER_JOB\" > seen");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  const RankRunResult result = RunCommandRank(a, &fake, Options(dir));
  EXPECT_TRUE(result.status.ok()) << result.status;
  EXPECT_TRUE(result.finish_reported);
  ASSERT_EQ(fake.finishes(0).size(), 1u);
  EXPECT_TRUE(fake.finishes(0)[0].ok());
  EXPECT_EQ(fake.join(0).spec_fingerprint(), JobSpecFingerprint(a.spec()));
  const std::string seen = ReadFile(fs::path(dir) / "seen");  // ran in the default workdir
  EXPECT_THAT(seen, StartsWith("0/1 127.0.0.1 "));
  EXPECT_THAT(seen, HasSubstr(" job-000001"));
  // Rank 0 published the port it put in MASTER_PORT.
  absl::StatusOr<std::string> master = store_.Get(kTorchMasterKey, absl::ZeroDuration());
  ASSERT_TRUE(master.ok());
  EXPECT_THAT(seen, HasSubstr(" " + master->substr(master->find(':') + 1) + " "));
}

TEST_F(CommandRankTest, OtherRanksUseRankZerosAddress) {
  const std::string dir = TmpDir("rank1");
  ASSERT_TRUE(store_.Set(kTorchMasterKey, "10.1.2.3:29999").ok());
  const v1::Assignment a = ShellJob("echo \"$RANK $MASTER_ADDR:$MASTER_PORT\" > seen", 1, 2);
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_TRUE(RunCommandRank(a, &fake, Options(dir)).status.ok());
  EXPECT_EQ(ReadFile(fs::path(dir) / "seen"), "1 10.1.2.3:29999\n");
}

TEST_F(CommandRankTest, AFailureQuotesTheTracebacksLastLines) {
  const v1::Assignment a = ShellJob(
      "echo 'Traceback (most recent call last):' >&2; "
      "echo '  File \"train.py\", line 9, in <module>' >&2; "
      "echo 'ValueError: injected failure at step 3 on rank 0' >&2; exit 1");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  const RankRunResult result = RunCommandRank(a, &fake, Options(TmpDir("failure")));
  EXPECT_FALSE(result.status.ok());
  ASSERT_EQ(fake.finishes(0).size(), 1u);
  const v1::FinishRankRequest finish = fake.finishes(0)[0];
  EXPECT_FALSE(finish.ok());
  // A crash may be the machine's: restartable; the exit code decides.
  EXPECT_EQ(finish.failure().kind(), v1::RankFailure::EXITED);
  EXPECT_THAT(finish.error(),
              StartsWith("command exited with code 1: ValueError: injected failure at step 3 "
                         "on rank 0\nlast lines of its stderr:\nTraceback"));
}

TEST_F(CommandRankTest, AScriptThatSaysItsFailureIsTheJobsReportsAJobError) {
  // What ringleader.JobError's hook does: the word in the file the launcher named.
  const v1::Assignment a = ShellJob(
      "echo JOB_ERROR > \"$RINGLEADER_FAILURE_FILE\"; echo 'JobError: bad labels' >&2; exit 1");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_FALSE(RunCommandRank(a, &fake, Options(TmpDir("job_error"))).status.ok());
  ASSERT_EQ(fake.finishes(0).size(), 1u);
  EXPECT_EQ(fake.finishes(0)[0].failure().kind(), v1::RankFailure::JOB_ERROR);
  EXPECT_THAT(fake.finishes(0)[0].error(), HasSubstr("JobError: bad labels"));
}

TEST_F(CommandRankTest, ACommandKilledByASignalReportsItsNumber) {
  const v1::Assignment a = ShellJob("kill -9 $$");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_FALSE(RunCommandRank(a, &fake, Options(TmpDir("killed"))).status.ok());
  ASSERT_EQ(fake.finishes(0).size(), 1u);
  EXPECT_EQ(fake.finishes(0)[0].failure().kind(), v1::RankFailure::SIGNAL);
  EXPECT_EQ(fake.finishes(0)[0].failure().signal(), 9);
}

// The script finds the rank's --snapshot_dir in RINGLEADER_SNAPSHOT_DIR; a failed command leaves
// what it wrote there to the next attempt, one that exited 0 has it removed.
TEST_F(CommandRankTest, TheSnapshotDirOutlivesAFailureNotASuccess) {
  const std::string dir = TmpDir("snapshots");
  const std::string snapshots = (fs::path(dir) / "shm" / "job-000001").string();
  CommandRankOptions options = Options(dir);
  options.snapshot_dir = snapshots;
  const v1::Assignment failing = ShellJob(
      "mkdir -p \"$RINGLEADER_SNAPSHOT_DIR/rank-$RANK\" && "
      "echo 7 > \"$RINGLEADER_SNAPSHOT_DIR/rank-$RANK/step-7.pt\" && exit 1");
  FakeCoordinator fake(JobSpecFingerprint(failing.spec()));
  EXPECT_FALSE(RunCommandRank(failing, &fake, options).status.ok());
  EXPECT_EQ(ReadFile(fs::path(snapshots) / "rank-0" / "step-7.pt"), "7\n");

  const v1::Assignment resuming =
      ShellJob("cat \"$RINGLEADER_SNAPSHOT_DIR/rank-$RANK/step-7.pt\" > resumed");
  FakeCoordinator again(JobSpecFingerprint(resuming.spec()));
  EXPECT_TRUE(RunCommandRank(resuming, &again, options).status.ok());
  EXPECT_EQ(ReadFile(fs::path(dir) / "resumed"), "7\n");
  EXPECT_FALSE(fs::exists(snapshots));
}

TEST_F(CommandRankTest, AMissingProgramOrWorkdirIsAJobErrorBeforeJoining) {
  v1::Assignment a = ShellJob("true");
  a.mutable_spec()->set_command(0, "no-such-program-xyz");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_FALSE(RunCommandRank(a, &fake, Options(TmpDir("missing"))).status.ok());
  ASSERT_EQ(fake.finishes(0).size(), 1u);
  EXPECT_EQ(fake.finishes(0)[0].failure().kind(), v1::RankFailure::JOB_ERROR);
  EXPECT_THAT(fake.finishes(0)[0].error(),
              HasSubstr("command[0]: 'no-such-program-xyz' was not found in PATH"));
  EXPECT_EQ(fake.join(0).job_id(), "");  // never joined

  v1::Assignment b = ShellJob("true");
  b.mutable_spec()->set_workdir("/no/such/workdir");
  FakeCoordinator fake_b(JobSpecFingerprint(b.spec()));
  EXPECT_FALSE(RunCommandRank(b, &fake_b, Options(TmpDir("nowd"))).status.ok());
  ASSERT_EQ(fake_b.finishes(0).size(), 1u);
  EXPECT_EQ(fake_b.finishes(0)[0].failure().kind(), v1::RankFailure::JOB_ERROR);
  EXPECT_THAT(fake_b.finishes(0)[0].error(),
              HasSubstr("workdir: '/no/such/workdir' is not a directory on this worker"));
}

TEST_F(CommandRankTest, AGpuWorkersCommandSeesItsHostsGpusAndItsLocalRank) {
  const std::string dir = TmpDir("gpu");
  ASSERT_TRUE(store_.Set(kTorchMasterKey, "10.1.2.3:29999").ok());
  v1::Assignment a = ShellJob("echo \"$LOCAL_RANK $CUDA_VISIBLE_DEVICES\" > seen", 1, 2);
  a.set_local_rank(1);
  a.set_local_world_size(2);
  a.add_local_gpus(3);
  a.add_local_gpus(5);
  CommandRankOptions options = Options(dir);
  options.gpu = 5;
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_TRUE(RunCommandRank(a, &fake, options).status.ok());
  EXPECT_EQ(ReadFile(fs::path(dir) / "seen"), "1 3,5\n");
}

TEST_F(CommandRankTest, GpusThatDisagreeWithTheAssignmentFailTheRankBeforeJoining) {
  v1::Assignment a = ShellJob("true", 1, 2);
  a.set_local_rank(1);
  a.set_local_world_size(2);
  a.add_local_gpus(3);
  a.add_local_gpus(5);
  CommandRankOptions options = Options(TmpDir("gpu_mismatch"));
  options.gpu = 3;  // the assignment puts GPU 5 at local rank 1
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  EXPECT_FALSE(RunCommandRank(a, &fake, options).status.ok());
  ASSERT_EQ(fake.finishes(1).size(), 1u);
  // This worker's setup, not the job's: the job may run elsewhere.
  EXPECT_EQ(fake.finishes(1)[0].failure().kind(), v1::RankFailure::KIND_UNSPECIFIED);
  EXPECT_THAT(fake.finishes(1)[0].error(), HasSubstr("this worker drives GPU 3 as local rank 1"));
  EXPECT_EQ(fake.join(1).job_id(), "");  // never joined
}

TEST_F(CommandRankTest, StopsTheCommandWhenTheCoordinatorSaysStop) {
  const v1::Assignment a = ShellJob("exec sleep 1000");
  FakeCoordinator fake(JobSpecFingerprint(a.spec()));
  fake.set_over_after_probes(2);  // the second keepalive answers stop
  const RankRunResult result = RunCommandRank(a, &fake, Options(TmpDir("stop")));
  EXPECT_FALSE(result.status.ok());
  EXPECT_THAT(std::string(result.status.message()), HasSubstr("killed by signal 15 (SIGTERM)"));
  EXPECT_GE(fake.probes(), 2);
}

}  // namespace
}  // namespace ringleader
