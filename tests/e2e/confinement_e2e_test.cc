// End to end, what a job may touch on a worker: real daemons started with
// --allowed_roots=<tmp>/confined-root, and a coordinator started without
// --allow_fault_injection.
//   - checkpoint_dir: /etc fails the job at once (no restart), naming the field, the path and the
//     allowed roots; nothing is written under /etc;
//   - a symbolic link inside the root leading out of it, as checkpoint_dir, is refused alike and
//     nothing is written where it leads;
//   - model.init_from and a command job's workdir outside the root are refused too;
//   - the same job with checkpoint_dir inside the root succeeds and writes its checkpoint there;
//   - a spec with model.faults is refused at submit.
#include <cstdlib>
#include <filesystem>
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
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(60);

// Canonical: the messages quote the resolved paths.
fs::path TestTmp() { return fs::canonical(std::getenv("TEST_TMPDIR")); }
std::string Root() { return (TestTmp() / "confined-root").string(); }
std::string Outside() { return (TestTmp() / "confined-outside").string(); }

std::string OutsideMessage(const std::string& field, const std::string& what) {
  return absl::StrCat(field, ": ", what, " is outside the worker's allowed roots (", Root(),
                      "): set ", field,
                      " under one of them, or add a root with ringleader-worker --allowed_roots");
}

bool IsEmptyDirectory(const std::string& dir) {
  std::error_code error;
  return fs::is_directory(dir, error) && fs::is_empty(dir, error);
}

class ConfinementE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(Root());
    fs::create_directories(Outside());
    ClusterOptions options;
    // Replaces the cluster's default roots (the whole TEST_TMPDIR, which holds Outside()).
    options.worker_flags = {"--allowed_roots=" + Root()};
    options.allow_fault_injection = false;
    StartCluster(options);
  }

  // A job that would write a checkpoint (final.ckpt) and may restart twice: a refusal must
  // not be restarted.
  static v1::JobSpec CheckpointingJob(const std::string& name, const std::string& dir) {
    v1::JobSpec spec = SmallSyntheticSpec(name);
    spec.set_max_restarts(2);
    spec.set_checkpoint_dir(dir);
    return spec;
  }

  static void ExpectRefusedWithoutRestart(const JobHistory& history,
                                          const std::string& message) {
    ASSERT_TRUE(history.ended);
    EXPECT_EQ(history.final.state(), v1::JOB_STATE_FAILED) << LastReason(history.final);
    EXPECT_THAT(LastReason(history.final), HasSubstr(message));
    EXPECT_EQ(history.final.restarts(), 0u) << "a refused path is the job's error: no restart";
    EXPECT_EQ(history.final.generation(), 1u);
  }
};

TEST_F(ConfinementE2eTest, CheckpointDirEtcIsRefusedNamingTheFieldAndTheAllowedRoots) {
  const JobHistory history = RunJob(CheckpointingJob("confined-etc", "/etc"), kJobTimeout);
  ExpectRefusedWithoutRestart(history, OutsideMessage("checkpoint_dir", "/etc"));
  EXPECT_FALSE(fs::exists(fs::path("/etc") / history.final.job_id()))
      << "a checkpoint directory was created under /etc";
}

TEST_F(ConfinementE2eTest, ASymlinkInsideTheRootLeadingOutIsRefused) {
  const std::string link = Root() + "/escape";
  fs::remove(link);
  fs::create_symlink(Outside(), link);
  const JobHistory history = RunJob(CheckpointingJob("confined-symlink", link), kJobTimeout);
  ExpectRefusedWithoutRestart(
      history,
      OutsideMessage("checkpoint_dir", absl::StrCat(link, " resolves to ", Outside(), ", which")));
  EXPECT_TRUE(IsEmptyDirectory(Outside())) << "something was written through the link";
}

TEST_F(ConfinementE2eTest, InitFromAndACommandJobsWorkdirOutsideTheRootAreRefused) {
  v1::JobSpec init = SmallSyntheticSpec("confined-init-from");
  init.mutable_model()->set_init_from(Outside() + "/weights.safetensors");
  ExpectRefusedWithoutRestart(
      RunJob(init, kJobTimeout),
      OutsideMessage("model.init_from", Outside() + "/weights.safetensors"));

  v1::JobSpec command;
  command.set_name("confined-workdir");
  command.set_world_size(2);
  command.set_max_restarts(2);
  command.add_command("sh");
  command.add_command("-c");
  command.add_command("touch ran");
  command.set_workdir(Outside());
  ExpectRefusedWithoutRestart(RunJob(command, kJobTimeout), OutsideMessage("workdir", Outside()));
  EXPECT_TRUE(IsEmptyDirectory(Outside())) << "the command ran in the refused workdir";
}

TEST_F(ConfinementE2eTest, TheSameJobWithItsCheckpointDirInsideTheRootSucceeds) {
  const std::string dir = Root() + "/checkpoints";  // created by rank 0
  const JobHistory history = RunJob(CheckpointingJob("confined-inside", dir), kJobTimeout);
  ASSERT_TRUE(history.ended);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  EXPECT_TRUE(fs::exists(fs::path(dir) / history.final.job_id() / "final.ckpt"))
      << "no final checkpoint in " << dir;
}

TEST_F(ConfinementE2eTest, FaultInjectionIsRefusedAtSubmitWithoutTheCoordinatorsFlag) {
  v1::JobSpec spec = SmallSyntheticSpec("confined-faults");
  spec.mutable_model()->mutable_faults()->set_crash_at_step(3);
  spec.mutable_model()->mutable_faults()->set_crash_rank(1);
  const absl::StatusOr<std::string> submitted = cluster_->Submit(spec);
  ASSERT_FALSE(submitted.ok()) << "accepted as " << *submitted;
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(submitted.status().message()),
              HasSubstr("model.faults: this coordinator does not accept fault injection"));
  EXPECT_THAT(std::string(submitted.status().message()),
              HasSubstr("start the coordinator with --allow_fault_injection"));
  // The same job without faults is accepted (and runs).
  spec.mutable_model()->clear_faults();
  const JobHistory history = RunJob(spec, kJobTimeout);
  EXPECT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
