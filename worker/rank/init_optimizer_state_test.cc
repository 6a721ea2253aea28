// model.init_optimizer_state through the real training loop: a 2-rank ddp job writes its final
// checkpoint; new 4-rank jobs start from it with its momentum, under ddp and zero2 (ranks as
// threads on the shared-memory backend, a fake coordinator recording the reports).
//
// On shared memory every reduction sums in rank order, so zero2 follows ddp bit for bit
// (zero2_equivalence_test.cc): two jobs that load the same weights and momentum must report
// identical losses and gradient norms at every step, and write identical final checkpoints.
// Without init_optimizer_state the first step's loss is the same (same weights) but its update
// is not (fresh momentum), so the second step's loss differs: the momentum was loaded.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using testing_util::Watchdog;

constexpr uint64_t kSteps = 20;

// 16-64-33-4, SGD with momentum, dampening and weight decay; buckets small enough that zero2
// reduce-scatters three of them.
v1::JobSpec Spec(uint32_t world, const std::string& strategy, const std::string& tag) {
  v1::JobSpec spec;
  spec.set_name("init-optimizer-state");
  spec.set_world_size(world);
  spec.set_backend("gloo");
  spec.set_strategy(strategy);
  for (uint32_t width : {16u, 64u, 33u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(2048);
  spec.mutable_data()->set_max_test_examples(64);
  spec.set_batch_size(8);
  spec.set_epochs(1);
  spec.set_max_steps(kSteps);
  spec.set_drift_interval_steps(10);
  spec.set_collective_timeout_ms(30000);
  spec.mutable_optimizer()->set_learning_rate(0.05);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.mutable_optimizer()->set_weight_decay(0.0005);
  spec.mutable_optimizer()->set_dampening(0.1);
  spec.mutable_sync()->set_first_bucket_mb(0.0005);
  spec.mutable_sync()->set_bucket_cap_mb(0.001);
  spec.set_checkpoint_dir((std::filesystem::path(std::getenv("TEST_TMPDIR")) /
                           absl::StrCat(tag, "-", strategy, "-", world))
                              .string());
  ApplyJobSpecDefaults(&spec);
  return spec;
}

struct JobRun {
  std::vector<RankRunResult> results;
  std::vector<std::vector<v1::StepReport>> steps;  // per rank
};

JobRun Train(const v1::JobSpec& spec) {
  FakeCoordinator fake(JobSpecFingerprint(spec));
  JobRun run;
  run.results = RunRanksOverGloo(spec, &fake, {}, OnSharedMemory());
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    run.steps.push_back(fake.steps(rank));
  }
  return run;
}

void ExpectOk(const JobRun& run, const std::string& what) {
  for (size_t rank = 0; rank < run.results.size(); ++rank) {
    EXPECT_TRUE(run.results[rank].status.ok())
        << what << " rank " << rank << ": " << run.results[rank].status;
  }
}

// The source: 2 ranks of ddp, kSteps steps; its final checkpoint (with momentum).
std::string TrainSource(const std::string& tag, double momentum = 0.9) {
  v1::JobSpec source = Spec(2, "ddp", tag);
  source.mutable_optimizer()->set_momentum(momentum);
  ExpectOk(Train(source), "source");
  return source.checkpoint_dir() + "/job-1/final.ckpt";
}

v1::JobSpec Continuing(const std::string& strategy, const std::string& from, bool momentum) {
  v1::JobSpec spec = Spec(4, strategy, momentum ? "continue" : "restart");
  spec.mutable_model()->set_init_from(from);
  spec.mutable_model()->set_init_optimizer_state(momentum);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

TEST(InitOptimizerStateTest, Zero2AndDdpOnFourRanksContinueATwoRankDdpJobAlike) {
  Watchdog watchdog(absl::Seconds(120), "init_optimizer_state");
  const std::string from = TrainSource("source");
  if (::testing::Test::HasFailure()) return;
  absl::StatusOr<CheckpointData> source = ReadCheckpoint(from);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_NE(source->FindTensor("fc1.weight.momentum_buffer"), nullptr);

  const v1::JobSpec ddp_spec = Continuing("ddp", from, true);
  const v1::JobSpec zero2_spec = Continuing("zero2", from, true);
  const v1::JobSpec fresh_spec = Continuing("ddp", from, false);
  const JobRun ddp = Train(ddp_spec);
  const JobRun zero2 = Train(zero2_spec);
  const JobRun fresh = Train(fresh_spec);
  ExpectOk(ddp, "ddp");
  ExpectOk(zero2, "zero2");
  ExpectOk(fresh, "ddp without init_optimizer_state");
  if (::testing::Test::HasFailure()) return;

  for (uint32_t rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(ddp.steps[rank].size(), kSteps);
    ASSERT_EQ(zero2.steps[rank].size(), kSteps);
    for (size_t s = 0; s < kSteps; ++s) {
      const v1::StepReport& a = ddp.steps[rank][s];
      const v1::StepReport& b = zero2.steps[rank][s];
      EXPECT_EQ(a.step(), s + 1) << "the new job's steps count from 1";
      EXPECT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(a.local_grad_norm(), b.local_grad_norm()) << "rank " << rank << " step " << s + 1;
      // The synced norm is computed in another order under zero2 (zero2_equivalence_test.cc).
      EXPECT_NEAR(a.synced_grad_norm(), b.synced_grad_norm(), 1e-5 * a.synced_grad_norm());
    }
  }
  // Both end at the same parameters and momentum, bit for bit (zero2's gathered whole).
  absl::StatusOr<CheckpointData> ddp_final =
      ReadCheckpoint(ddp_spec.checkpoint_dir() + "/job-1/final.ckpt");
  absl::StatusOr<CheckpointData> zero2_final =
      ReadCheckpoint(zero2_spec.checkpoint_dir() + "/job-1/final.ckpt");
  ASSERT_TRUE(ddp_final.ok()) << ddp_final.status();
  ASSERT_TRUE(zero2_final.ok()) << zero2_final.status();
  EXPECT_EQ(ddp_final->step, kSteps) << "the step counter started at 0";
  ASSERT_EQ(ddp_final->tensors.size(), zero2_final->tensors.size());
  for (size_t t = 0; t < ddp_final->tensors.size(); ++t) {
    EXPECT_EQ(ddp_final->tensors[t].name, zero2_final->tensors[t].name);
    EXPECT_EQ(ddp_final->tensors[t].data, zero2_final->tensors[t].data)
        << ddp_final->tensors[t].name;
  }

  // Same weights: the same first loss. Fresh momentum: another first update, so the second
  // step's loss differs from the runs that loaded it.
  EXPECT_EQ(fresh.steps[0][0].loss(), ddp.steps[0][0].loss());
  EXPECT_NE(fresh.steps[0][1].loss(), ddp.steps[0][1].loss());
}

TEST(InitOptimizerStateTest, ACheckpointWithoutMomentumIsRefusedOnEveryRankNamingIt) {
  Watchdog watchdog(absl::Seconds(60), "init_optimizer_state without momentum");
  const std::string from = TrainSource("no-momentum", /*momentum=*/0);
  if (::testing::Test::HasFailure()) return;
  v1::JobSpec spec = Continuing("zero2", from, true);
  spec.set_world_size(2);
  const JobRun run = Train(spec);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const absl::Status& status = run.results[rank].status;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat("model.init_from: init_from ", from,
                                       ": holds no optimizer momentum")));
    EXPECT_THAT(std::string(status.message()), HasSubstr("drop model.init_optimizer_state"));
  }
}

}  // namespace
}  // namespace ringleader
