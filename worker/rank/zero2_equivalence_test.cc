// strategy zero2 against ddp through the real training loop: ranks as threads (gloo over
// loopback, and the shared-memory backend), a fake coordinator recording the reports, 200 steps.
//
// What must be equal, and why. Both strategies bucket the gradients alike (zero2 keeps the
// DDP reducer's initial buckets) and average them over the ranks; ddp all-reduces each bucket,
// zero2 reduce-scatters it padded to a multiple of the world size. The SGD update is the same
// element-wise code (zero1's sharded optimizer) and the parameter gather copies bytes.
//   - Shared memory: all-reduce and reduce-scatter both sum every element in rank order
//     (((g0 + g1) + g2) + g3) / N: the averaged gradients, hence parameters, losses and
//     momentum, are bit-identical to ddp's at every step. Asserted exactly.
//   - gloo: the backend's reduce-scatter is an all-reduce of the padded bucket (gloo_collective.h)
//     and its ring reduces each element in an order that depends on where the element falls in
//     the ring's chunks, which shift with the padding (and with ddp's readiness float). At 2
//     ranks a sum of two is order-free and the result is again bit-identical; at 4 ranks the
//     orders differ, each averaged gradient may differ by an ulp, and the trajectories drift
//     apart by rounding only: asserted within kGlooTolerance (relative, per element and loss;
//     the measured worst is logged).
//   - The synced gradient norm is computed differently (ddp: over the full averaged gradient;
//     zero2: each rank's owned sum of squares, all-reduced as one float), so it agrees to fp32
//     rounding (1e-5 relative), and is identical on every rank of a zero2 run.
//   - Two zero2 runs are bit-identical (every reduction order is fixed).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/sharded_equivalence_test_util.h"

namespace ringleader {
namespace {

using testing_util::Watchdog;
using equivalence::Backend;
using equivalence::CompareSteps;
using equivalence::CompareTensors;
using equivalence::EquivalenceSpec;
using equivalence::ExpectBitIdentical;
using equivalence::ExpectMeasuredIsPredicted;
using equivalence::kEquivalenceSteps;
using equivalence::kTrainableElements;
using equivalence::Train;
using equivalence::TrainingRun;

void ExpectZero2MatchesDdp(uint32_t world, Backend backend) {
  Watchdog watchdog(absl::Seconds(240), "zero2 vs ddp training");
  const std::string tag = backend == Backend::kShm ? "shm" : "gloo";
  const v1::JobSpec ddp_spec = EquivalenceSpec(world, "ddp", tag);
  const v1::JobSpec zero2_spec = EquivalenceSpec(world, "zero2", tag);
  const TrainingRun ddp = Train(ddp_spec, backend);
  const TrainingRun zero2 = Train(zero2_spec, backend);
  const TrainingRun again = Train(EquivalenceSpec(world, "zero2", tag + "-again"), backend);
  if (::testing::Test::HasFailure()) return;

  // Bit-identical where every reduction sums in the same order (see the file comment).
  const bool exact = backend == Backend::kShm || world == 2;
  const double loss_diff = CompareSteps(ddp, zero2, world, exact, 4,
                                        "three reduce-scatters and the stats all-reduce");
  const double final_diff =
      CompareTensors(ddp.final_checkpoint, zero2.final_checkpoint, exact, "final.ckpt");
  const double periodic_diff = CompareTensors(ddp.periodic_checkpoint, zero2.periodic_checkpoint,
                                              exact, "the checkpoint after step 100");
  std::cout << tag << " " << world << " ranks, zero2 vs ddp after " << kEquivalenceSteps
            << " steps: worst relative difference of losses " << loss_diff << ", of final "
            << "tensors " << final_diff << ", of step-100 tensors " << periodic_diff << "\n";

  // Two zero2 runs: bit for bit.
  ExpectBitIdentical(zero2, again, world, "rerun");

  // Optimizer state per rank: the owned elements only, every element owned once.
  uint64_t owned_total = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    EXPECT_EQ(ddp.results[rank].outcome.momentum_elements, kTrainableElements);
    owned_total += zero2.results[rank].outcome.momentum_elements;
  }
  EXPECT_EQ(owned_total, kTrainableElements);
  ExpectMeasuredIsPredicted(ddp, ddp_spec);
  ExpectMeasuredIsPredicted(zero2, zero2_spec);
}

TEST(Zero2EquivalenceTest, TwoGlooRanksMatchDdpBitForBit) {
  ExpectZero2MatchesDdp(2, Backend::kGloo);
}

TEST(Zero2EquivalenceTest, FourGlooRanksMatchDdpWithinRounding) {
  ExpectZero2MatchesDdp(4, Backend::kGloo);
}

TEST(Zero2EquivalenceTest, FourSharedMemoryRanksMatchDdpBitForBit) {
  ExpectZero2MatchesDdp(4, Backend::kShm);
}

// Gradient accumulation, find_unused_parameters and bf16 communication
// (sharded_equivalence_test_util.h).
TEST(Zero2EquivalenceTest, AccumulationUnusedParametersAndBf16CommunicationMatchDdp) {
  Watchdog watchdog(absl::Seconds(240), "zero2 accumulation, unused parameters, bf16");
  equivalence::ExpectReductionSettingsMatchDdp("zero2", 2 * 3 + 1, 3 + 1);
}

// A parameter without gradient on one rank (the unused-parameter fault) fails the first step on
// EVERY rank, naming the rank and the parameter, instead of hanging (without
// sync.find_unused_parameters).
TEST(Zero2LoopTest, AnUnusedParameterOnOneRankFailsEveryRank) {
  Watchdog watchdog(absl::Seconds(60), "zero2 unused parameter");
  v1::JobSpec spec = EquivalenceSpec(2, "zero2", "unused");
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc1.bias");
  spec.set_max_steps(5);
  spec.set_checkpoint_dir("");
  const TrainingRun run = Train(spec, Backend::kGloo, /*checkpoints=*/false, /*expect_ok=*/false);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const absl::Status& status = run.results[rank].status;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find("rank 1: fc1.bias"), absl::string_view::npos) << status;
    EXPECT_NE(status.message().find("step 1"), absl::string_view::npos) << status;
  }
}

// Frozen parameters take no part (no gradient, no shard); the rest trains, and the measured
// memory is still the predicted one.
TEST(Zero2LoopTest, FrozenParametersAreLeftOut) {
  Watchdog watchdog(absl::Seconds(60), "zero2 frozen");
  v1::JobSpec spec = EquivalenceSpec(2, "zero2", "frozen");
  spec.mutable_model()->add_frozen_parameters("fc2.weight");
  spec.set_max_steps(20);
  spec.set_checkpoint_dir("");
  const TrainingRun run = Train(spec, Backend::kShm, /*checkpoints=*/false);
  if (::testing::Test::HasFailure()) return;
  ExpectMeasuredIsPredicted(run, spec);
  EXPECT_EQ(run.results[0].outcome.momentum_elements + run.results[1].outcome.momentum_elements,
            kTrainableElements - 64u * 33u);
  EXPECT_LT(run.steps[0].back().loss(), run.steps[0].front().loss());
}

// The point of zero2: gradients + optimizer state, as the ranks measure them after their first
// step, at most 40% of ddp's at 4 ranks, for a model whose buckets are small next to it
// (16-64x10-4, one layer per bucket: two buckets are 21% of the trainable elements).
TEST(Zero2MemoryTest, FourRanksHoldAtMostFortyPercentOfDdpsGradientsAndOptimizerState) {
  Watchdog watchdog(absl::Seconds(120), "zero2 memory");
  for (uint32_t world : {2u, 4u}) {
    double state[2] = {0, 0};  // ddp, zero2: the largest rank's gradients + optimizer bytes
    for (const char* strategy : {"ddp", "zero2"}) {
      v1::JobSpec spec = EquivalenceSpec(world, strategy, "memory");
      spec.mutable_model()->clear_layers();
      spec.mutable_model()->add_layers(16);
      for (int k = 0; k < 10; ++k) spec.mutable_model()->add_layers(64);
      spec.mutable_model()->add_layers(4);
      spec.mutable_sync()->set_first_bucket_mb(0.001);
      spec.mutable_sync()->set_bucket_cap_mb(0.01);
      spec.set_max_steps(3);
      spec.set_checkpoint_dir("");
      const TrainingRun run = Train(spec, Backend::kGloo, /*checkpoints=*/false);
      if (::testing::Test::HasFailure()) return;
      ExpectMeasuredIsPredicted(run, spec);
      for (uint32_t rank = 0; rank < world; ++rank) {
        const v1::RankMemory& m = run.results[rank].outcome.memory;
        const double bytes = static_cast<double>(m.gradient_bytes() + m.optimizer_bytes());
        double& slot = state[std::string(strategy) == "zero2"];
        slot = std::max(slot, bytes);
        std::cout << strategy << " " << world << " ranks, rank " << rank << ": "
                  << m.ShortDebugString() << "\n";
      }
    }
    std::cout << world << " ranks: zero2 gradients + optimizer = " << state[1] / state[0]
              << " of ddp's\n";
    if (world == 4) {
      EXPECT_LE(state[1], 0.40 * state[0]);
    }
    EXPECT_LT(state[1], state[0]);
  }
}

}  // namespace
}  // namespace ringleader
