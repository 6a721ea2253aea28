// strategy zero1 against ddp through the real training loop: ranks as threads over gloo
// (gloo_ranks_test_util.h), a fake coordinator recording the reports, 200 steps each.
//
// Why the results must be EXACTLY equal, not merely close: both strategies all-reduce the same
// gradients through the same reducer (same buckets, same collectives, same order), so every rank
// holds bit-identical averaged gradients in both. ddp then updates every element on every rank;
// zero1 updates each element on its one owner rank only, with the very same element-wise SGD
// code (SgdOptimizer's loop on a sub-range: the update of element k reads and writes element k
// and its momentum only, float32 operation for operation, no fused multiply-add), and the
// all-gather copies the owner's bytes to every other rank without arithmetic. Each element
// therefore follows the same sequence of float operations in both strategies, so parameters,
// losses, gradient norms and momentum agree bit for bit at every step.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "common/job_spec.h"
#include "gtest/gtest.h"
#include "plan/memory_plan.h"
#include "plan/shard_plan.h"
#include "worker/checkpoint/training_state.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

using testing_util::Watchdog;

constexpr uint64_t kSteps = 200;
constexpr uint64_t kCheckpointInterval = 100;

// 16-64-33-4: 3369 trainable elements, divisible by neither 2 nor 4; momentum, dampening-free
// torch defaults with weight decay; three buckets, so overlap and bucket order are exercised.
v1::JobSpec EquivalenceSpec(uint32_t world, const std::string& strategy, bool nesterov) {
  v1::JobSpec spec;
  spec.set_name("zero1-equivalence");
  spec.set_world_size(world);
  spec.set_backend("gloo");
  spec.set_strategy(strategy);
  for (uint32_t width : {16u, 64u, 33u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(2048);
  spec.mutable_data()->set_max_test_examples(256);
  spec.set_batch_size(8);
  spec.set_epochs(64);
  spec.set_max_steps(kSteps);
  spec.set_drift_interval_steps(50);
  spec.set_checkpoint_interval_steps(kCheckpointInterval);
  spec.set_collective_timeout_ms(30000);
  spec.mutable_optimizer()->set_learning_rate(0.05);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.mutable_optimizer()->set_weight_decay(0.0005);
  if (nesterov) {
    spec.mutable_optimizer()->set_nesterov(true);
  } else {
    spec.mutable_optimizer()->set_dampening(0.1);
  }
  spec.mutable_sync()->set_first_bucket_mb(0.004);
  spec.mutable_sync()->set_bucket_cap_mb(0.006);
  spec.set_checkpoint_dir((std::filesystem::path(std::getenv("TEST_TMPDIR")) /
                           absl::StrCat(strategy, "-", world, nesterov ? "-nesterov" : ""))
                              .string());
  ApplyJobSpecDefaults(&spec);
  return spec;
}

struct Run {
  std::vector<RankRunResult> results;
  std::vector<std::vector<v1::StepReport>> steps;  // per rank
  CheckpointData final_checkpoint;                 // rank 0's final.ckpt
  CheckpointData periodic_checkpoint;              // the one after step 100
};

Run Train(const v1::JobSpec& spec) {
  FakeCoordinator fake(JobSpecFingerprint(spec));
  Run run;
  run.results = RunRanksOverGloo(spec, &fake);
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    EXPECT_TRUE(run.results[rank].status.ok())
        << spec.strategy() << " rank " << rank << ": " << run.results[rank].status;
    run.steps.push_back(fake.steps(rank));
  }
  const std::string dir = spec.checkpoint_dir() + "/job-1/";
  absl::StatusOr<CheckpointData> final_checkpoint = ReadCheckpoint(dir + "final.ckpt");
  EXPECT_TRUE(final_checkpoint.ok()) << final_checkpoint.status();
  if (final_checkpoint.ok()) run.final_checkpoint = *std::move(final_checkpoint);
  absl::StatusOr<CheckpointData> periodic =
      ReadCheckpoint(dir + PeriodicCheckpointName(kCheckpointInterval));
  EXPECT_TRUE(periodic.ok()) << periodic.status();
  if (periodic.ok()) run.periodic_checkpoint = *std::move(periodic);
  return run;
}

// Every tensor (parameters, momentum buffers) equal bit for bit; the same names in the same
// order: a zero1 checkpoint is a ddp checkpoint, so either strategy resumes from the other's.
void ExpectSameTensors(const CheckpointData& ddp, const CheckpointData& zero1,
                       const std::string& what) {
  EXPECT_EQ(ddp.step, zero1.step) << what;
  EXPECT_EQ(ddp.epoch, zero1.epoch) << what;
  ASSERT_EQ(ddp.tensors.size(), zero1.tensors.size()) << what;
  size_t momentum_tensors = 0;
  for (size_t t = 0; t < ddp.tensors.size(); ++t) {
    const CheckpointTensor& a = ddp.tensors[t];
    const CheckpointTensor& b = zero1.tensors[t];
    EXPECT_EQ(a.name, b.name) << what;
    EXPECT_EQ(a.shape, b.shape) << what << " " << a.name;
    // Exact equality on purpose, bit for bit (see the file comment).
    ASSERT_EQ(a.data.size(), b.data.size()) << what << " " << a.name;
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0)
        << what << ": " << a.name << " differs";
    if (IsMomentumBufferName(a.name)) ++momentum_tensors;
  }
  EXPECT_EQ(momentum_tensors, 6u) << what << ": every parameter's momentum is in the file";
}

void ExpectZero1MatchesDdp(uint32_t world, bool nesterov) {
  Watchdog watchdog(absl::Seconds(240), "zero1 vs ddp training");
  const Run ddp = Train(EquivalenceSpec(world, "ddp", nesterov));
  const Run zero1 = Train(EquivalenceSpec(world, "zero1", nesterov));
  if (::testing::Test::HasFailure()) return;

  // The same trajectory, step by step, on every rank.
  for (uint32_t rank = 0; rank < world; ++rank) {
    ASSERT_EQ(ddp.steps[rank].size(), kSteps);
    ASSERT_EQ(zero1.steps[rank].size(), kSteps);
    for (size_t s = 0; s < kSteps; ++s) {
      const v1::StepReport& a = ddp.steps[rank][s];
      const v1::StepReport& b = zero1.steps[rank][s];
      ASSERT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << s + 1;
      ASSERT_EQ(a.local_grad_norm(), b.local_grad_norm()) << "rank " << rank << " step " << s + 1;
      ASSERT_EQ(a.synced_grad_norm(), b.synced_grad_norm())
          << "rank " << rank << " step " << s + 1;
      // Every rank issued the same collectives (the digest differs from ddp's: it covers the
      // ledger's sequence numbers, which count the shard gathers too).
      EXPECT_EQ(b.collective_digest(), zero1.steps[0][s].collective_digest())
          << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(b.collectives(), a.collectives()) << "the reducer's collectives, step " << s + 1;
      EXPECT_EQ(a.has_drift(), b.has_drift());
      if (b.has_drift()) {
        EXPECT_EQ(b.drift(), 0.0) << "zero1 replicas identical after the gather, step " << s + 1;
      }
    }
  }
  EXPECT_LT(zero1.steps[0].back().loss(), zero1.steps[0].front().loss()) << "it trains";

  // Final parameters and momentum, and the periodic checkpoint (gathered mid-run).
  ExpectSameTensors(ddp.final_checkpoint, zero1.final_checkpoint, "final.ckpt");
  ExpectSameTensors(ddp.periodic_checkpoint, zero1.periodic_checkpoint, "the checkpoint after step 100");
  EXPECT_EQ(zero1.final_checkpoint.step, kSteps);

  // Momentum held per rank: all of it under ddp, this rank's 1/world shard under zero1.
  const std::vector<size_t> counts = {16 * 64, 64, 64 * 33, 33, 33 * 4, 4};
  const ShardPlan plan = PlanShards(counts, world);
  ASSERT_EQ(plan.total, 3369u);
  uint64_t zero1_total = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    const uint64_t ddp_held = ddp.results[rank].outcome.momentum_elements;
    const uint64_t zero1_held = zero1.results[rank].outcome.momentum_elements;
    EXPECT_EQ(ddp_held, plan.total) << "rank " << rank;
    EXPECT_EQ(zero1_held, plan.owned_count(rank)) << "rank " << rank;
    EXPECT_LE(zero1_held, (plan.total + world - 1) / world) << "rank " << rank;
    EXPECT_GE(zero1_held, plan.total / world) << "rank " << rank;
    zero1_total += zero1_held;
  }
  EXPECT_EQ(zero1_total, plan.total) << "the shards cover every element once";

  // What each rank measured it holds (sent with its first step only) is what
  // plan/memory_plan.h predicts for that rank, byte for byte.
  for (const Run* run : {&ddp, &zero1}) {
    const v1::JobSpec spec = EquivalenceSpec(world, run == &ddp ? "ddp" : "zero1", nesterov);
    for (uint32_t rank = 0; rank < world; ++rank) {
      absl::StatusOr<v1::RankMemory> predicted =
          PredictRankMemory(spec, spec.strategy(), world, rank);
      ASSERT_TRUE(predicted.ok()) << predicted.status();
      v1::RankMemory measured = run->results[rank].outcome.memory;
      measured.clear_allocator_bytes();  // never predicted (training_loop_test checks it)
      EXPECT_EQ(measured.SerializeAsString(), predicted->SerializeAsString())
          << spec.strategy() << " rank " << rank << ": measured " << measured.ShortDebugString()
          << ", predicted " << predicted->ShortDebugString();
      EXPECT_GT(measured.optimizer_bytes(), 0u);
      ASSERT_TRUE(run->steps[rank][0].has_memory()) << spec.strategy() << " rank " << rank;
      EXPECT_EQ(run->steps[rank][0].memory().total_bytes(), measured.total_bytes());
      EXPECT_FALSE(run->steps[rank][1].has_memory()) << "only the first step carries it";
    }
  }
}

TEST(Zero1EquivalenceTest, TwoRanksMatchDdpBitForBit) { ExpectZero1MatchesDdp(2, false); }

TEST(Zero1EquivalenceTest, FourRanksMatchDdpBitForBit) { ExpectZero1MatchesDdp(4, false); }

TEST(Zero1EquivalenceTest, FourRanksWithNesterovMatchDdpBitForBit) {
  ExpectZero1MatchesDdp(4, true);
}

}  // namespace
}  // namespace ringleader
