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
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/memory_plan.h"
#include "gtest/gtest.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/checkpoint_series.h"
#include "worker/checkpoint/training_state.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/shm/shm_collective.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

using testing_util::Watchdog;

constexpr uint64_t kSteps = 200;
constexpr uint64_t kCheckpointInterval = 100;
// Relative difference allowed between gloo zero2 and gloo ddp at 4 ranks after 200 steps.
constexpr double kGlooTolerance = 1e-4;

enum class Backend { kGloo, kShm };

// 16-64-33-4 (3369 trainable elements, not divisible by 4), torch-default SGD with momentum and
// weight decay; buckets [fc3.bias fc3.weight] 136, [fc2.bias fc2.weight] 2145,
// [fc1.bias fc1.weight] 1088: three buckets, so the two-buffer pool is reused within a step.
v1::JobSpec EquivalenceSpec(uint32_t world, const std::string& strategy, const std::string& tag) {
  v1::JobSpec spec;
  spec.set_name("zero2-equivalence");
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
  spec.mutable_optimizer()->set_dampening(0.1);
  spec.mutable_sync()->set_first_bucket_mb(0.0005);
  spec.mutable_sync()->set_bucket_cap_mb(0.001);
  spec.set_checkpoint_dir((std::filesystem::path(std::getenv("TEST_TMPDIR")) /
                           absl::StrCat(strategy, "-", world, "-", tag))
                              .string());
  ApplyJobSpecDefaults(&spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

struct TrainingRun {
  std::vector<RankRunResult> results;
  std::vector<std::vector<v1::StepReport>> steps;  // per rank
  CheckpointData final_checkpoint;                 // rank 0's final.ckpt
  CheckpointData periodic_checkpoint;              // the one after step 100
};

// Each rank on the shared-memory backend instead of gloo's TCP (one store for the job).
std::function<void(uint32_t, TrainingLoopOptions*)> OnShm() {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  return [store](uint32_t, TrainingLoopOptions* options) {
    options->make_collective =
        [store](const v1::Assignment& a, const ComputePlacement&,
                const RendezvousProgress& progress) -> absl::StatusOr<std::unique_ptr<Collective>> {
      ShmOptions shm;
      shm.collective_timeout = absl::Milliseconds(a.spec().collective_timeout_ms());
      shm.on_progress = progress;
      absl::StatusOr<ShmRendezvous> made = CreateShmCollective(
          store, "job-1/1/", static_cast<int>(a.rank()), static_cast<int>(a.world_size()), shm);
      if (!made.ok()) return made.status();
      if (made->collective == nullptr) return absl::UnavailableError(made->unavailable);
      return std::move(made->collective);
    };
  };
}

TrainingRun Train(const v1::JobSpec& spec, Backend backend, bool checkpoints = true,
                  bool expect_ok = true) {
  FakeCoordinator fake(JobSpecFingerprint(spec));
  TrainingRun run;
  run.results =
      RunRanksOverGloo(spec, &fake, {}, backend == Backend::kShm ? OnShm() : nullptr);
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    EXPECT_TRUE(!expect_ok || run.results[rank].status.ok())
        << spec.strategy() << " rank " << rank << ": " << run.results[rank].status;
    run.steps.push_back(fake.steps(rank));
  }
  if (!checkpoints) return run;
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

double RelativeDifference(double a, double b) {
  return std::abs(a - b) / std::max(1e-3, std::max(std::abs(a), std::abs(b)));
}

// Same names, shapes and order (a zero2 checkpoint is a ddp checkpoint); values bit-identical
// when `exact`, else within kGlooTolerance. Returns the worst relative difference.
double CompareTensors(const CheckpointData& ddp, const CheckpointData& zero2, bool exact,
                      const std::string& what) {
  EXPECT_EQ(ddp.step, zero2.step) << what;
  EXPECT_EQ(ddp.epoch, zero2.epoch) << what;
  EXPECT_EQ(ddp.tensors.size(), zero2.tensors.size()) << what;
  double worst = 0;
  size_t momentum_tensors = 0;
  for (size_t t = 0; t < std::min(ddp.tensors.size(), zero2.tensors.size()); ++t) {
    const CheckpointTensor& a = ddp.tensors[t];
    const CheckpointTensor& b = zero2.tensors[t];
    EXPECT_EQ(a.name, b.name) << what;
    EXPECT_EQ(a.shape, b.shape) << what << " " << a.name;
    if (a.data.size() != b.data.size()) {
      ADD_FAILURE() << what << " " << a.name << ": sizes differ";
      continue;
    }
    if (exact) {
      EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0)
          << what << ": " << a.name << " differs";
    }
    for (size_t k = 0; k < a.data.size(); ++k) {
      worst = std::max(worst, RelativeDifference(a.data[k], b.data[k]));
    }
    if (IsMomentumBufferName(a.name)) ++momentum_tensors;
  }
  EXPECT_EQ(momentum_tensors, 6u) << what << ": every parameter's momentum is in the file";
  EXPECT_LE(worst, kGlooTolerance) << what;
  return worst;
}

// Loss, norms and drift per step; returns the worst relative loss difference.
double CompareSteps(const TrainingRun& ddp, const TrainingRun& zero2, uint32_t world, bool exact) {
  double worst = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    EXPECT_EQ(ddp.steps[rank].size(), kSteps);
    EXPECT_EQ(zero2.steps[rank].size(), kSteps);
    if (ddp.steps[rank].size() != kSteps || zero2.steps[rank].size() != kSteps) return 1;
    for (size_t s = 0; s < kSteps; ++s) {
      const v1::StepReport& a = ddp.steps[rank][s];
      const v1::StepReport& b = zero2.steps[rank][s];
      if (exact) {
        EXPECT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << s + 1;
        EXPECT_EQ(a.local_grad_norm(), b.local_grad_norm()) << "rank " << rank << " step " << s + 1;
      }
      worst = std::max(worst, RelativeDifference(a.loss(), b.loss()));
      EXPECT_LE(RelativeDifference(a.loss(), b.loss()), kGlooTolerance)
          << "rank " << rank << " step " << s + 1;
      // Global norm: the same on every rank, fp32-close to ddp's.
      EXPECT_EQ(b.synced_grad_norm(), zero2.steps[0][s].synced_grad_norm())
          << "rank " << rank << " step " << s + 1;
      EXPECT_NEAR(b.synced_grad_norm(), a.synced_grad_norm(),
                  (exact ? 1e-5 : kGlooTolerance) * a.synced_grad_norm())
          << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(b.collective_digest(), zero2.steps[0][s].collective_digest())
          << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(b.collectives(), 4u) << "three reduce-scatters and the stats all-reduce";
      EXPECT_EQ(a.has_drift(), b.has_drift());
      if (b.has_drift()) {
        EXPECT_EQ(b.drift(), 0.0) << "replicas identical after the gather";
      }
    }
  }
  EXPECT_LT(zero2.steps[0].back().loss(), zero2.steps[0].front().loss()) << "it trains";
  return worst;
}

// What each rank measured (first step) is what common/memory_plan.h predicts, to the byte.
void ExpectMeasuredIsPredicted(const TrainingRun& run, const v1::JobSpec& spec) {
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    absl::StatusOr<v1::RankMemory> predicted =
        PredictRankMemory(spec, spec.strategy(), spec.world_size(), rank);
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    const v1::RankMemory& measured = run.results[rank].outcome.memory;
    EXPECT_EQ(measured.parameter_bytes(), predicted->parameter_bytes()) << "rank " << rank;
    EXPECT_EQ(measured.gradient_bytes(), predicted->gradient_bytes()) << "rank " << rank;
    EXPECT_EQ(measured.optimizer_bytes(), predicted->optimizer_bytes()) << "rank " << rank;
    EXPECT_EQ(measured.comm_buffer_bytes(), predicted->comm_buffer_bytes()) << "rank " << rank;
    EXPECT_EQ(measured.total_bytes(), predicted->total_bytes()) << "rank " << rank;
    EXPECT_GT(measured.optimizer_bytes(), 0u);
  }
}

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
  const double loss_diff = CompareSteps(ddp, zero2, world, exact);
  const double final_diff =
      CompareTensors(ddp.final_checkpoint, zero2.final_checkpoint, exact, "final.ckpt");
  const double periodic_diff = CompareTensors(ddp.periodic_checkpoint, zero2.periodic_checkpoint,
                                              exact, "the checkpoint after step 100");
  std::cout << tag << " " << world << " ranks, zero2 vs ddp after " << kSteps
            << " steps: worst relative difference of losses " << loss_diff << ", of final "
            << "tensors " << final_diff << ", of step-100 tensors " << periodic_diff << "\n";

  // Two zero2 runs: bit for bit.
  for (uint32_t rank = 0; rank < world; ++rank) {
    for (size_t s = 0; s < kSteps; ++s) {
      ASSERT_EQ(zero2.steps[rank][s].loss(), again.steps[rank][s].loss()) << "step " << s + 1;
      ASSERT_EQ(zero2.steps[rank][s].synced_grad_norm(), again.steps[rank][s].synced_grad_norm());
    }
  }
  CompareTensors(zero2.final_checkpoint, again.final_checkpoint, /*exact=*/true, "rerun");

  // Optimizer state per rank: the owned elements only, every element owned once.
  uint64_t owned_total = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    EXPECT_EQ(ddp.results[rank].outcome.momentum_elements, 3369u);
    owned_total += zero2.results[rank].outcome.momentum_elements;
  }
  EXPECT_EQ(owned_total, 3369u);
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

// A parameter without gradient on one rank (the unused-parameter fault) fails the first step on
// EVERY rank, naming the rank and the parameter, instead of hanging.
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
            3369u - 64u * 33u);
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
