// checkpoint_format sharded through the real training loop: ranks as threads over gloo, a fake
// coordinator that also serves the attempt's key-value store (rank 0 publishes the resume
// point there). A job crashes on rank 1 in generation 1; generation 2 resumes from the newest
// sharded checkpoint and must continue bit for bit as an uninterrupted run of the same job
// (every reduction order is fixed, and the resumed state is the state written). A damaged
// shard makes rank 0 fall back to the previous checkpoint, naming the shard.
#include "checkpoint/sharded_checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/attempt_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using testing_util::Watchdog;

constexpr uint64_t kSteps = 30;
constexpr uint64_t kInterval = 5;
constexpr uint32_t kCrashStep = 23;  // after the checkpoints of steps 5, 10, 15 and 20

v1::JobSpec Spec(const std::string& strategy, const std::string& tag, bool crash,
                 const std::string& format = "sharded") {
  v1::JobSpec spec;
  spec.set_name("sharded-checkpoints");
  spec.set_world_size(2);
  spec.set_backend("gloo");
  spec.set_strategy(strategy);
  spec.set_checkpoint_format(format);
  for (uint32_t width : {16u, 64u, 33u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(1024);
  spec.mutable_data()->set_max_test_examples(64);
  spec.set_batch_size(8);
  spec.set_epochs(1);
  spec.set_max_steps(kSteps);
  spec.set_drift_interval_steps(10);
  spec.set_checkpoint_interval_steps(kInterval);
  spec.set_keep_last_checkpoints(2);
  spec.set_collective_timeout_ms(3000);
  spec.mutable_optimizer()->set_dampening(0.1);
  spec.mutable_sync()->set_first_bucket_mb(0.0005);
  spec.mutable_sync()->set_bucket_cap_mb(0.001);
  if (crash) {
    spec.mutable_model()->mutable_faults()->set_crash_rank(1);
    spec.mutable_model()->mutable_faults()->set_crash_at_step(kCrashStep);
  }
  spec.set_checkpoint_dir(
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / absl::StrCat(tag, "-", strategy))
          .string());
  ApplyJobSpecDefaults(&spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

using Attempt = AttemptResult;

void ExpectOk(const Attempt& attempt, const std::string& what) {
  for (size_t rank = 0; rank < attempt.results.size(); ++rank) {
    EXPECT_TRUE(attempt.results[rank].status.ok())
        << what << " rank " << rank << ": " << attempt.results[rank].status;
  }
}

// Generation 2's steps continue `reference`'s exactly, and the final checkpoints are equal.
void ExpectContinuesBitForBit(const Attempt& resumed, uint64_t from_step, const Attempt& reference,
                              const v1::JobSpec& resumed_spec, const v1::JobSpec& reference_spec) {
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(resumed.steps[rank].size(), kSteps - from_step) << "rank " << rank;
    ASSERT_EQ(reference.steps[rank].size(), kSteps);
    for (size_t k = 0; k < resumed.steps[rank].size(); ++k) {
      const v1::StepReport& a = resumed.steps[rank][k];
      const v1::StepReport& b = reference.steps[rank][from_step + k];
      EXPECT_EQ(a.step(), b.step());
      EXPECT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << a.step();
      EXPECT_EQ(a.synced_grad_norm(), b.synced_grad_norm()) << "step " << a.step();
    }
  }
  absl::StatusOr<CheckpointData> a =
      ReadCheckpoint(resumed_spec.checkpoint_dir() + "/job-1/final.ckpt");
  absl::StatusOr<CheckpointData> b =
      ReadCheckpoint(reference_spec.checkpoint_dir() + "/job-1/final.ckpt");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  for (size_t t = 0; t < a->tensors.size(); ++t) {
    EXPECT_EQ(a->tensors[t].name, b->tensors[t].name);
    EXPECT_EQ(a->tensors[t].data, b->tensors[t].data) << a->tensors[t].name;
  }
}

class ShardedCheckpointTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardedCheckpointTest, RestartContinuesAsAnUninterruptedRun) {
  Watchdog watchdog(absl::Seconds(120), "sharded resume");
  const v1::JobSpec reference_spec = Spec(GetParam(), "reference", /*crash=*/false);
  const Attempt reference = RunAttempt(reference_spec, 1);
  ExpectOk(reference, "reference");
  const v1::JobSpec spec = Spec(GetParam(), "restart", /*crash=*/true);
  const Attempt crashed = RunAttempt(spec, 1);
  EXPECT_FALSE(crashed.results[1].status.ok());
  if (::testing::Test::HasFailure()) return;

  // Checkpoints 15 and 20 kept, each a manifest and one shard per rank; 5 and 10 pruned with
  // their shards.
  const std::string dir = spec.checkpoint_dir() + "/job-1";
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "step-000000000015.ckpt", "step-000000000015.shard-0-of-2",
                         "step-000000000015.shard-1-of-2", "step-000000000020.ckpt",
                         "step-000000000020.shard-0-of-2", "step-000000000020.shard-1-of-2"));
  absl::StatusOr<CheckpointData> manifest = ReadCheckpoint(dir + "/step-000000000020.ckpt");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_TRUE(IsShardedManifest(*manifest));
  EXPECT_TRUE(manifest->tensors.empty()) << "no gathered state in the manifest";

  // The shards consolidate into what ddp writes at the same step, bit for bit (on 2 gloo ranks
  // every strategy follows ddp exactly): the model's order and shapes, every element.
  const v1::JobSpec ddp_spec = Spec("ddp", "ddp-reference", /*crash=*/false, "consolidated");
  ExpectOk(RunAttempt(ddp_spec, 1), "ddp reference");
  absl::StatusOr<CheckpointData> ddp =
      ReadCheckpoint(ddp_spec.checkpoint_dir() + "/job-1/step-000000000020.ckpt");
  absl::StatusOr<CheckpointData> consolidated =
      ConsolidateShards(dir + "/step-000000000020.ckpt", *manifest);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  ASSERT_TRUE(consolidated.ok()) << consolidated.status();
  EXPECT_EQ(consolidated->step, 20u);
  ASSERT_EQ(consolidated->tensors.size(), ddp->tensors.size());
  for (size_t t = 0; t < ddp->tensors.size(); ++t) {
    EXPECT_EQ(consolidated->tensors[t].name, ddp->tensors[t].name);
    EXPECT_EQ(consolidated->tensors[t].shape, ddp->tensors[t].shape) << ddp->tensors[t].name;
    EXPECT_EQ(consolidated->tensors[t].data, ddp->tensors[t].data) << ddp->tensors[t].name;
  }

  const Attempt resumed = RunAttempt(spec, 2);
  ExpectOk(resumed, "generation 2");
  if (::testing::Test::HasFailure()) return;
  EXPECT_EQ(resumed.steps[0].front().resumed_from_step(), 20u);
  EXPECT_EQ(resumed.steps[0].front().resumed_from(), dir + "/step-000000000020.ckpt");
  ExpectContinuesBitForBit(resumed, 20, reference, spec, reference_spec);
}

TEST_P(ShardedCheckpointTest, ACorruptShardFallsBackToThePreviousCheckpointNamingIt) {
  Watchdog watchdog(absl::Seconds(120), "sharded fallback");
  const v1::JobSpec reference_spec = Spec(GetParam(), "reference-2", /*crash=*/false);
  const Attempt reference = RunAttempt(reference_spec, 1);
  ExpectOk(reference, "reference");
  const v1::JobSpec spec = Spec(GetParam(), "corrupt", /*crash=*/true);
  RunAttempt(spec, 1);
  const std::string shard = spec.checkpoint_dir() + "/job-1/step-000000000020.shard-1-of-2";
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.good()) << shard;
    file.seekp(100);
    file.put('\x5a');
  }
  const Attempt resumed = RunAttempt(spec, 2);
  ExpectOk(resumed, "generation 2");
  if (::testing::Test::HasFailure()) return;
  const v1::StepReport& first = resumed.steps[0].front();
  EXPECT_EQ(first.resumed_from_step(), 15u);
  ASSERT_EQ(first.skipped_checkpoints_size(), 1);
  EXPECT_THAT(first.skipped_checkpoints(0),
              HasSubstr(absl::StrCat("shard ", shard, " is corrupt")));
  ExpectContinuesBitForBit(resumed, 15, reference, spec, reference_spec);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ShardedCheckpointTest,
                         ::testing::Values("zero1", "zero2", "fsdp"));

}  // namespace
}  // namespace ringleader
