// strategy fsdp against ddp (and zero2) through the real training loop: ranks as threads (gloo
// over loopback, and the shared-memory backend), a fake coordinator recording the reports, 200
// steps.
//
// What must be equal, and why. fsdp reduces gradients exactly as zero2 does (the same plan, the
// same Zero2Reducer) and steps the same owned elements with the same element-wise SGD code. The
// only difference is where the parameters live: a zero2 rank all-gathers every owner's updated
// elements after the step and computes with its full copy; an fsdp rank keeps its shard and
// gathers each layer's buckets while the layer before it runs. Both gathers copy bytes, so an
// fsdp rank computes with exactly the values a zero2 rank holds:
//   - fsdp == zero2 bit for bit, on every backend and world size (asserted at 4 gloo ranks,
//     the one case where zero2 itself is not bit-identical to ddp);
//   - hence, as zero2_equivalence_test.cc explains, fsdp == ddp bit for bit on shared memory
//     and at 2 gloo ranks; at 4 gloo ranks the ring all-reduce sums some elements in another
//     order than the padded reduce-scatter does, so the trajectories agree to rounding only:
//     within kGlooTolerance (relative, per element and loss; the worst is printed);
//   - the synced gradient norm is zero2's global norm: fp32-close to ddp's (1e-5 relative);
//   - two fsdp runs are bit-identical (asserted where fsdp is not compared with zero2).
// The checkpoints (parameters gathered whole on every rank, momentum gathered as zero1/zero2
// do) are ddp's format and values; measured memory is plan/memory_plan.h's, to the byte.
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

void ExpectFsdpMatchesDdp(uint32_t world, Backend backend, bool against_zero2) {
  Watchdog watchdog(absl::Seconds(240), "fsdp vs ddp training");
  const std::string tag = backend == Backend::kShm ? "shm" : "gloo";
  const v1::JobSpec ddp_spec = EquivalenceSpec(world, "ddp", tag);
  const v1::JobSpec fsdp_spec = EquivalenceSpec(world, "fsdp", tag);
  const TrainingRun ddp = Train(ddp_spec, backend);
  const TrainingRun fsdp = Train(fsdp_spec, backend);
  if (::testing::Test::HasFailure()) return;

  const bool exact = backend == Backend::kShm || world == 2;
  const double loss_diff = CompareSteps(
      ddp, fsdp, world, exact, 7,
      "three reduce-scatters, the stats all-reduce and three layer gathers (fc2 stays held "
      "from the forward into the backward)");
  const double final_diff =
      CompareTensors(ddp.final_checkpoint, fsdp.final_checkpoint, exact, "final.ckpt");
  const double periodic_diff = CompareTensors(ddp.periodic_checkpoint, fsdp.periodic_checkpoint,
                                              exact, "the checkpoint after step 100");
  std::cout << tag << " " << world << " ranks, fsdp vs ddp after " << kEquivalenceSteps
            << " steps: worst relative difference of losses " << loss_diff << ", of final "
            << "tensors " << final_diff << ", of step-100 tensors " << periodic_diff << "\n";
  // Evaluation gathers layer by layer: the same figures (exactly where the model is).
  ASSERT_EQ(ddp.epochs.size(), fsdp.epochs.size());
  for (size_t e = 0; e < ddp.epochs.size(); ++e) {
    if (exact) {
      EXPECT_EQ(ddp.epochs[e].test_loss(), fsdp.epochs[e].test_loss()) << "epoch " << e;
    }
    EXPECT_NEAR(ddp.epochs[e].test_loss(), fsdp.epochs[e].test_loss(), 1e-4) << "epoch " << e;
  }

  if (!against_zero2) {
    // Two fsdp runs: bit for bit. (Against zero2 instead, the rerun is implied: fsdp equals
    // zero2 bit for bit, and two zero2 runs are, zero2_equivalence_test.cc.)
    const TrainingRun again = Train(EquivalenceSpec(world, "fsdp", tag + "-again"), backend);
    if (::testing::Test::HasFailure()) return;
    ExpectBitIdentical(fsdp, again, world, "rerun");
  } else {
    // fsdp computes with the very bytes a zero2 rank holds: identical even where ddp is not.
    const TrainingRun zero2 = Train(EquivalenceSpec(world, "zero2", tag), backend);
    if (::testing::Test::HasFailure()) return;
    ExpectBitIdentical(zero2, fsdp, world, "vs zero2");
  }

  uint64_t owned_total = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    owned_total += fsdp.results[rank].outcome.momentum_elements;
    const v1::RankMemory& d = ddp.results[rank].outcome.memory;
    const v1::RankMemory& f = fsdp.results[rank].outcome.memory;
    std::cout << tag << " " << world << " ranks, rank " << rank << ": ddp " << d.ShortDebugString()
              << "\n    fsdp " << f.ShortDebugString() << "\n";
  }
  EXPECT_EQ(owned_total, kTrainableElements);
  ExpectMeasuredIsPredicted(ddp, ddp_spec);
  ExpectMeasuredIsPredicted(fsdp, fsdp_spec);
}

TEST(FsdpEquivalenceTest, TwoGlooRanksMatchDdpBitForBit) {
  ExpectFsdpMatchesDdp(2, Backend::kGloo, /*against_zero2=*/false);
}

TEST(FsdpEquivalenceTest, FourGlooRanksMatchZero2BitForBitAndDdpWithinRounding) {
  ExpectFsdpMatchesDdp(4, Backend::kGloo, /*against_zero2=*/true);
}

TEST(FsdpEquivalenceTest, FourSharedMemoryRanksMatchDdpBitForBit) {
  ExpectFsdpMatchesDdp(4, Backend::kShm, /*against_zero2=*/false);
}

// Gradient accumulation, find_unused_parameters and bf16 communication
// (sharded_equivalence_test_util.h): per
// micro-batch three reduce-scatters and three layer gathers.
TEST(FsdpEquivalenceTest, AccumulationUnusedParametersAndBf16CommunicationMatchDdp) {
  Watchdog watchdog(absl::Seconds(240), "fsdp accumulation, unused parameters, bf16");
  equivalence::ExpectReductionSettingsMatchDdp("fsdp", 2 * (3 + 3) + 1, 3 + 3 + 1);
}

// Model buffers (model.with_buffers: the input mean and the bool input mask of fc1) stay whole
// on every rank, broadcast from rank 0 like ddp's: fsdp shards the parameters only. Bit for bit
// ddp on 2 gloo ranks, checkpoints (which hold the buffers) included: final.ckpt, and the
// step-100 checkpoint written sharded (rank 0's shard holds the buffers) and consolidated.
TEST(FsdpEquivalenceTest, ModelBuffersStayWholeAndFollowDdp) {
  Watchdog watchdog(absl::Seconds(120), "fsdp with buffers");
  v1::JobSpec ddp_spec = EquivalenceSpec(2, "ddp", "buffers");
  v1::JobSpec fsdp_spec = EquivalenceSpec(2, "fsdp", "buffers");
  fsdp_spec.set_checkpoint_format("sharded");
  for (v1::JobSpec* spec : {&ddp_spec, &fsdp_spec}) {
    spec->mutable_model()->set_with_buffers(true);
    spec->mutable_sync()->set_ignore_bool_buffers(true);
    ASSERT_TRUE(ValidateJobSpec(*spec).ok()) << ValidateJobSpec(*spec);
  }
  const TrainingRun ddp = Train(ddp_spec, Backend::kGloo);
  const TrainingRun fsdp = Train(fsdp_spec, Backend::kGloo);
  if (::testing::Test::HasFailure()) return;
  CompareSteps(ddp, fsdp, 2, /*exact=*/true, 7,
               "three reduce-scatters, the stats all-reduce and three layer gathers (the buffer "
               "broadcast is in the ledger, not in the step's count, as under ddp)");
  for (const auto& [theirs, mine] :
       {std::make_pair(&ddp.final_checkpoint, &fsdp.final_checkpoint),
        std::make_pair(&ddp.periodic_checkpoint, &fsdp.periodic_checkpoint)}) {
    ASSERT_NE(theirs->FindTensor("fc1.input_mean"), nullptr);
    ASSERT_EQ(mine->tensors.size(), theirs->tensors.size());
    for (size_t t = 0; t < theirs->tensors.size(); ++t) {
      EXPECT_EQ(mine->tensors[t].name, theirs->tensors[t].name) << "step " << theirs->step;
      EXPECT_EQ(mine->tensors[t].shape, theirs->tensors[t].shape) << theirs->tensors[t].name;
      EXPECT_EQ(mine->tensors[t].data, theirs->tensors[t].data) << theirs->tensors[t].name;
    }
  }
}

// Frozen parameters under fsdp: sharded and gathered like the others, ready (as zeros) from
// the start of every step, never stepped. Bit for bit the ddp run that leaves them out of its
// buckets (2 gloo ranks: a sum of two does not depend on the bucket layout), and the measured
// memory is the predicted one (no momentum for the frozen elements a rank owns).
TEST(FsdpEquivalenceTest, FrozenParametersStayPutAndFollowDdp) {
  Watchdog watchdog(absl::Seconds(120), "fsdp frozen");
  v1::JobSpec ddp_spec = EquivalenceSpec(2, "ddp", "frozen");
  v1::JobSpec fsdp_spec = EquivalenceSpec(2, "fsdp", "frozen");
  for (v1::JobSpec* spec : {&ddp_spec, &fsdp_spec}) {
    spec->mutable_model()->add_frozen_parameters("fc2.weight");
    spec->mutable_model()->add_frozen_parameters("fc3.bias");
    ASSERT_TRUE(ValidateJobSpec(*spec).ok()) << ValidateJobSpec(*spec);
  }
  const TrainingRun ddp = Train(ddp_spec, Backend::kGloo);
  const TrainingRun fsdp = Train(fsdp_spec, Backend::kGloo);
  if (::testing::Test::HasFailure()) return;
  CompareSteps(ddp, fsdp, 2, /*exact=*/true, 7,
               "three reduce-scatters, the stats all-reduce and three layer gathers");
  ASSERT_EQ(fsdp.final_checkpoint.tensors.size(), ddp.final_checkpoint.tensors.size());
  for (size_t t = 0; t < ddp.final_checkpoint.tensors.size(); ++t) {
    const CheckpointTensor& a = ddp.final_checkpoint.tensors[t];
    const CheckpointTensor& b = fsdp.final_checkpoint.tensors[t];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.data, a.data) << a.name;
  }
  EXPECT_EQ(fsdp.final_checkpoint.FindTensor("fc2.weight.momentum_buffer"), nullptr);
  // The frozen weight is the initial one: the same in both runs and never stepped.
  EXPECT_EQ(fsdp.final_checkpoint.FindTensor("fc2.weight")->data,
            fsdp.periodic_checkpoint.FindTensor("fc2.weight")->data);
  uint64_t momentum = 0;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    momentum += fsdp.results[rank].outcome.momentum_elements;
  }
  EXPECT_EQ(momentum, kTrainableElements - 64u * 33u - 4u);
  ExpectMeasuredIsPredicted(fsdp, fsdp_spec);
}

// A parameter without gradient on one rank fails the first step on every rank, naming it,
// instead of hanging (the layer gathers do not depend on which gradients a rank produced;
// without sync.find_unused_parameters).
TEST(FsdpLoopTest, AnUnusedParameterOnOneRankFailsEveryRank) {
  Watchdog watchdog(absl::Seconds(60), "fsdp unused parameter");
  v1::JobSpec spec = EquivalenceSpec(2, "fsdp", "unused");
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc1.bias");
  spec.set_max_steps(5);
  spec.set_checkpoint_dir("");
  FakeCoordinator fake(JobSpecFingerprint(spec));
  const std::vector<RankRunResult> results = RunRanksOverGloo(spec, &fake, {}, nullptr);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const absl::Status& status = results[rank].status;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find("rank 1: fc1.bias"), absl::string_view::npos) << status;
  }
}

// Weights loaded into the model before it is sharded (model.init_from; a resumed checkpoint
// takes the same path) are cut into the shards: fsdp continues from them exactly as ddp does.
TEST(FsdpLoopTest, StartsFromLoadedWeightsLikeDdp) {
  Watchdog watchdog(absl::Seconds(60), "fsdp init_from");
  v1::JobSpec source = EquivalenceSpec(2, "ddp", "init-source");
  source.set_max_steps(10);
  source.set_checkpoint_interval_steps(0);
  const TrainingRun trained = Train(source, Backend::kShm, /*checkpoints=*/false);
  if (::testing::Test::HasFailure()) return;
  const std::string weights = source.checkpoint_dir() + "/job-1/final.ckpt";
  TrainingRun runs[2];
  const char* strategies[2] = {"ddp", "fsdp"};
  for (int k = 0; k < 2; ++k) {
    v1::JobSpec spec = EquivalenceSpec(2, strategies[k], "init");
    spec.mutable_model()->set_init_from(weights);
    spec.set_max_steps(10);
    spec.set_checkpoint_dir("");
    runs[k] = Train(spec, Backend::kShm, /*checkpoints=*/false);
  }
  if (::testing::Test::HasFailure()) return;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(runs[1].steps[rank].size(), 10u);
    for (size_t s = 0; s < 10; ++s) {
      EXPECT_EQ(runs[0].steps[rank][s].loss(), runs[1].steps[rank][s].loss()) << "step " << s + 1;
    }
  }
  // Not the initial weights: the first loss is the trained model's, below the fresh one's.
  EXPECT_LT(runs[1].steps[0].front().loss(), trained.steps[0].front().loss());
}

// The point of fsdp: the parameters a rank holds shrink with the world size, down to its shard
// and two layers' staging (the layer computing and the next one, gathered meanwhile:
// plan/fsdp_plan.h). For a model whose layers are small next to it (16-64x10-4, one layer per
// bucket), measured after the first step: fsdp's parameters are below ddp's at 2 ranks and at
// most half of them at 4 (a quarter of the model in the shard, padding included, and two
// 64x64 layers of staging, 22% of it), and its total is below zero2's.
TEST(FsdpMemoryTest, ParametersShrinkWithTheWorldSize) {
  Watchdog watchdog(absl::Seconds(120), "fsdp memory");
  for (uint32_t world : {2u, 4u}) {
    uint64_t params[3] = {0, 0, 0};  // ddp, zero2, fsdp: the largest rank's parameter bytes
    uint64_t total[3] = {0, 0, 0};
    const char* strategies[3] = {"ddp", "zero2", "fsdp"};
    for (int k = 0; k < 3; ++k) {
      v1::JobSpec spec = EquivalenceSpec(world, strategies[k], "memory");
      spec.mutable_model()->clear_layers();
      spec.mutable_model()->add_layers(16);
      for (int layer = 0; layer < 10; ++layer) spec.mutable_model()->add_layers(64);
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
        params[k] = std::max<uint64_t>(params[k], m.parameter_bytes());
        total[k] = std::max<uint64_t>(total[k], m.total_bytes());
        std::cout << strategies[k] << " " << world << " ranks, rank " << rank << ": "
                  << m.ShortDebugString() << "\n";
      }
    }
    std::cout << world << " ranks: fsdp parameters = "
              << static_cast<double>(params[2]) / params[0] << " of ddp's, total "
              << static_cast<double>(total[2]) / total[0] << " of ddp's\n";
    EXPECT_LT(params[2], params[0]);
    if (world == 4) {
      EXPECT_LE(params[2], 0.50 * params[0]);
    }
    EXPECT_LT(total[2], total[1]);
  }
}

}  // namespace
}  // namespace ringleader
