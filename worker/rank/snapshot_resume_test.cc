// Snapshots in memory through the real training loop (ranks as threads over gloo, a fake
// coordinator serving the attempt's key-value store). A ddp job crashes on rank 1 before step
// 23 in generation 1; generation 2 resumes from the snapshot of step 22, newer than the
// checkpoint of step 20, so no step is lost, and continues bit for bit as an uninterrupted run.
// A rank whose snapshot is gone (its host replaced) is healed from its peer over the collective.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/rank/attempt_test_util.h"
#include "worker/rank/snapshots.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint64_t kSteps = 30;
constexpr uint32_t kCrashStep = 23;  // after the checkpoint of step 20 and the snapshot of 22

fs::path Root(const std::string& tag) {
  const fs::path root = fs::path(std::getenv("TEST_TMPDIR")) / tag;
  fs::remove_all(root);
  return root;
}

v1::JobSpec Spec(const fs::path& root, bool crash, bool checkpoints = true) {
  v1::JobSpec spec;
  spec.set_name("snapshots");
  spec.set_world_size(2);
  spec.set_backend("gloo");
  for (uint32_t width : {16u, 64u, 33u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(1024);
  spec.mutable_data()->set_max_test_examples(64);
  spec.set_batch_size(8);
  spec.set_epochs(1);
  spec.set_max_steps(kSteps);
  spec.set_drift_interval_steps(10);
  spec.set_snapshot_interval_steps(1);
  spec.set_collective_timeout_ms(3000);
  spec.mutable_optimizer()->set_dampening(0.1);
  spec.mutable_sync()->set_first_bucket_mb(0.0005);
  spec.mutable_sync()->set_bucket_cap_mb(0.001);
  if (checkpoints) {
    spec.set_checkpoint_dir((root / "ckpt").string());
    spec.set_checkpoint_interval_steps(10);
  }
  if (crash) {
    spec.mutable_model()->mutable_faults()->set_crash_rank(1);
    spec.mutable_model()->mutable_faults()->set_crash_at_step(kCrashStep);
  }
  ApplyJobSpecDefaults(&spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

// Rank r's snapshot directory under `root` (each rank its own worker's memory).
std::function<void(uint32_t, TrainingLoopOptions*)> SnapshotsUnder(const fs::path& root) {
  return [root](uint32_t rank, TrainingLoopOptions* options) {
    options->snapshot_dir = (root / absl::StrCat("worker-", rank) / "job-1").string();
  };
}

void ExpectOk(const AttemptResult& attempt, const std::string& what) {
  for (size_t rank = 0; rank < attempt.results.size(); ++rank) {
    EXPECT_TRUE(attempt.results[rank].status.ok())
        << what << " rank " << rank << ": " << attempt.results[rank].status;
  }
}

// `resumed`'s steps are `reference`'s from `from_step` on, bit for bit on every rank.
void ExpectContinues(const AttemptResult& resumed, uint64_t from_step,
                     const AttemptResult& reference) {
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(resumed.steps[rank].size(), kSteps - from_step) << "rank " << rank;
    ASSERT_EQ(reference.steps[rank].size(), kSteps);
    EXPECT_EQ(resumed.steps[rank][0].resumed_from_step(), from_step) << "rank " << rank;
    for (size_t k = 0; k < resumed.steps[rank].size(); ++k) {
      const v1::StepReport& a = resumed.steps[rank][k];
      const v1::StepReport& b = reference.steps[rank][from_step + k];
      EXPECT_EQ(a.step(), b.step());
      EXPECT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << a.step();
      EXPECT_EQ(a.synced_grad_norm(), b.synced_grad_norm()) << "step " << a.step();
    }
  }
}

TEST(SnapshotResumeTest, ACrashLosesNoStepAndTheRunContinuesBitForBit) {
  const fs::path root = Root("no-step-lost");
  const AttemptResult reference = RunAttempt(Spec(root / "reference", false), 1);
  ExpectOk(reference, "reference");
  const v1::JobSpec spec = Spec(root, true);
  const AttemptResult crashed = RunAttempt(spec, 1, SnapshotsUnder(root));
  ASSERT_FALSE(crashed.results[1].status.ok());
  // The last step before the crash left a snapshot (one offered while a write was in progress
  // may have been replaced by the next); at most the newest two are kept.
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const fs::path dir = root / absl::StrCat("worker-", rank) / "job-1";
    EXPECT_TRUE(fs::exists(dir / SnapshotFileName(kCrashStep - 1))) << dir;
    int kept = 0;
    for (const auto& entry : fs::directory_iterator(dir)) kept += entry.path().extension() == ".snap";
    EXPECT_GE(kept, 1) << dir;
    EXPECT_LE(kept, kSnapshotsKept) << dir;
  }

  const AttemptResult resumed = RunAttempt(spec, 2, SnapshotsUnder(root));
  ExpectOk(resumed, "generation 2");
  ExpectContinues(resumed, kCrashStep - 1, reference);
  EXPECT_THAT(resumed.steps[0][0].resumed_from(), HasSubstr(SnapshotFileName(kCrashStep - 1)));
  // The job ended: its snapshots are gone from the workers' memory.
  EXPECT_FALSE(fs::exists(root / "worker-0" / "job-1"));
  EXPECT_FALSE(fs::exists(root / "worker-1" / "job-1"));
}

TEST(SnapshotResumeTest, ARankWithoutTheSnapshotIsHealedFromItsPeerWithoutCheckpoints) {
  const fs::path root = Root("heal");
  const AttemptResult reference = RunAttempt(Spec(root / "reference", false, false), 1);
  ExpectOk(reference, "reference");
  const v1::JobSpec spec = Spec(root, true, /*checkpoints=*/false);
  const AttemptResult crashed = RunAttempt(spec, 1, SnapshotsUnder(root));
  ASSERT_FALSE(crashed.results[1].status.ok());
  // Rank 0's worker was replaced: its memory held nothing of the job.
  fs::remove_all(root / "worker-0");

  const AttemptResult resumed = RunAttempt(spec, 2, SnapshotsUnder(root));
  ExpectOk(resumed, "generation 2");
  ExpectContinues(resumed, kCrashStep - 1, reference);
  EXPECT_THAT(resumed.steps[0][0].resumed_from(),
              HasSubstr(absl::StrCat("snapshot of step ", kCrashStep - 1, " in rank 1")));
}

TEST(SnapshotResumeTest, WithEveryWorkerReplacedTheCheckpointIsTheFallback) {
  const fs::path root = Root("fallback");
  const AttemptResult reference = RunAttempt(Spec(root / "reference", false), 1);
  ExpectOk(reference, "reference");
  const v1::JobSpec spec = Spec(root, true);
  ASSERT_FALSE(RunAttempt(spec, 1, SnapshotsUnder(root)).results[1].status.ok());
  fs::remove_all(root / "worker-0");
  fs::remove_all(root / "worker-1");
  const AttemptResult resumed = RunAttempt(spec, 2, SnapshotsUnder(root));
  ExpectOk(resumed, "generation 2");
  ExpectContinues(resumed, 20, reference);
  EXPECT_THAT(resumed.steps[0][0].resumed_from(), HasSubstr(".ckpt"));
}

}  // namespace
}  // namespace ringleader
