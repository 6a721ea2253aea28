#include "worker/rank/sharded_equivalence_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_series.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/job_spec.h"
#include "gtest/gtest.h"
#include "plan/memory_plan.h"
#include "worker/checkpoint/training_state.h"
#include "worker/coordinator_client/fake_coordinator.h"

namespace ringleader {
namespace equivalence {

v1::JobSpec EquivalenceSpec(uint32_t world, const std::string& strategy, const std::string& tag) {
  v1::JobSpec spec;
  spec.set_name(absl::StrCat(strategy, "-equivalence"));
  spec.set_world_size(world);
  spec.set_backend("gloo");
  spec.set_strategy(strategy);
  for (uint32_t width : {16u, 64u, 33u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(2048);
  spec.mutable_data()->set_max_test_examples(256);
  spec.set_batch_size(8);
  spec.set_epochs(64);
  spec.set_max_steps(kEquivalenceSteps);
  spec.set_drift_interval_steps(50);
  spec.set_checkpoint_interval_steps(kEquivalenceCheckpointInterval);
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

TrainingRun Train(const v1::JobSpec& spec, Backend backend, bool checkpoints, bool expect_ok) {
  FakeCoordinator fake(JobSpecFingerprint(spec));
  TrainingRun run;
  run.results =
      RunRanksOverGloo(spec, &fake, {}, backend == Backend::kShm ? OnSharedMemory() : nullptr);
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    EXPECT_TRUE(!expect_ok || run.results[rank].status.ok())
        << spec.strategy() << " rank " << rank << ": " << run.results[rank].status;
    run.steps.push_back(fake.steps(rank));
  }
  run.epochs = fake.epochs(0);
  if (!checkpoints) return run;
  const std::string dir = spec.checkpoint_dir() + "/job-1/";
  absl::StatusOr<CheckpointData> final_checkpoint = ReadCheckpoint(dir + "final.ckpt");
  EXPECT_TRUE(final_checkpoint.ok()) << final_checkpoint.status();
  if (final_checkpoint.ok()) run.final_checkpoint = *std::move(final_checkpoint);
  const std::string periodic_path = dir + PeriodicCheckpointName(spec.checkpoint_interval_steps());
  absl::StatusOr<CheckpointData> periodic = ReadCheckpoint(periodic_path);
  if (periodic.ok() && IsShardedManifest(*periodic)) {
    periodic = ConsolidateShards(periodic_path, *periodic);  // checkpoint_format: sharded
  }
  EXPECT_TRUE(periodic.ok()) << periodic.status();
  if (periodic.ok()) run.periodic_checkpoint = *std::move(periodic);
  return run;
}

double RelativeDifference(double a, double b) {
  return std::abs(a - b) / std::max(1e-3, std::max(std::abs(a), std::abs(b)));
}

double CompareTensors(const CheckpointData& a_run, const CheckpointData& b_run, bool exact,
                      const std::string& what) {
  EXPECT_EQ(a_run.step, b_run.step) << what;
  EXPECT_EQ(a_run.epoch, b_run.epoch) << what;
  EXPECT_EQ(a_run.tensors.size(), b_run.tensors.size()) << what;
  double worst = 0;
  size_t momentum_tensors = 0;
  for (size_t t = 0; t < std::min(a_run.tensors.size(), b_run.tensors.size()); ++t) {
    const CheckpointTensor& a = a_run.tensors[t];
    const CheckpointTensor& b = b_run.tensors[t];
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
  EXPECT_EQ(a_run.tensors.size(), 12u) << what << ": 6 parameters and their momentum";
  EXPECT_EQ(momentum_tensors, 6u) << what << ": every parameter's momentum is in the file";
  EXPECT_LE(worst, kGlooTolerance) << what;
  return worst;
}

double CompareSteps(const TrainingRun& ddp, const TrainingRun& other, uint32_t world, bool exact,
                    uint32_t collectives, const std::string& why) {
  double worst = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    EXPECT_EQ(ddp.steps[rank].size(), kEquivalenceSteps);
    EXPECT_EQ(other.steps[rank].size(), kEquivalenceSteps);
    if (ddp.steps[rank].size() != kEquivalenceSteps ||
        other.steps[rank].size() != kEquivalenceSteps) {
      return 1;
    }
    for (size_t s = 0; s < kEquivalenceSteps; ++s) {
      const v1::StepReport& a = ddp.steps[rank][s];
      const v1::StepReport& b = other.steps[rank][s];
      if (exact) {
        EXPECT_EQ(a.loss(), b.loss()) << "rank " << rank << " step " << s + 1;
        EXPECT_EQ(a.local_grad_norm(), b.local_grad_norm()) << "rank " << rank << " step " << s + 1;
      }
      worst = std::max(worst, RelativeDifference(a.loss(), b.loss()));
      EXPECT_LE(RelativeDifference(a.loss(), b.loss()), kGlooTolerance)
          << "rank " << rank << " step " << s + 1;
      // Global norm: the same on every rank, fp32-close to ddp's.
      EXPECT_EQ(b.synced_grad_norm(), other.steps[0][s].synced_grad_norm())
          << "rank " << rank << " step " << s + 1;
      EXPECT_NEAR(b.synced_grad_norm(), a.synced_grad_norm(),
                  (exact ? 1e-5 : kGlooTolerance) * a.synced_grad_norm())
          << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(b.collective_digest(), other.steps[0][s].collective_digest())
          << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(b.collectives(), collectives) << why;
      EXPECT_EQ(a.has_drift(), b.has_drift());
      if (b.has_drift()) {
        EXPECT_EQ(b.drift(), 0.0) << "every rank computes with the same parameters";
      }
    }
  }
  EXPECT_LT(other.steps[0].back().loss(), other.steps[0].front().loss()) << "it trains";
  return worst;
}

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

void ExpectBitIdentical(const TrainingRun& a, const TrainingRun& b, uint32_t world,
                        const std::string& what) {
  for (uint32_t rank = 0; rank < world; ++rank) {
    ASSERT_EQ(a.steps[rank].size(), b.steps[rank].size()) << what;
    for (size_t s = 0; s < a.steps[rank].size(); ++s) {
      ASSERT_EQ(a.steps[rank][s].loss(), b.steps[rank][s].loss()) << what << " step " << s + 1;
      ASSERT_EQ(a.steps[rank][s].synced_grad_norm(), b.steps[rank][s].synced_grad_norm())
          << what << " step " << s + 1;
    }
  }
  CompareTensors(a.final_checkpoint, b.final_checkpoint, /*exact=*/true, what);
}

void ExpectReductionSettingsMatchDdp(const std::string& strategy,
                                     uint32_t accumulation_collectives,
                                     uint32_t unused_collectives) {
  enum Setting { kAccumulate, kUnused, kBf16 };
  const auto with = [&](const std::string& s, const std::string& tag, Setting setting) {
    v1::JobSpec spec = EquivalenceSpec(2, s, tag);
    if (setting == kAccumulate) {
      spec.mutable_sync()->set_gradient_accumulation_steps(2);
    } else if (setting == kBf16) {
      spec.mutable_sync()->set_comm_dtype("bf16");
    } else {
      spec.mutable_sync()->set_find_unused_parameters(true);
      spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
      spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc1.bias");
    }
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
    return spec;
  };
  {
    const v1::JobSpec ddp_spec = with("ddp", "accumulation", kAccumulate);
    const v1::JobSpec spec = with(strategy, "accumulation", kAccumulate);
    const TrainingRun ddp = Train(ddp_spec, Backend::kShm);
    const TrainingRun sharded = Train(spec, Backend::kShm);
    if (::testing::Test::HasFailure()) return;
    const double loss_diff =
        CompareSteps(ddp, sharded, 2, /*exact=*/false, accumulation_collectives,
                     "every micro-batch's reduce-scatters (and gathers), the stats all-reduce");
    const double tensor_diff = CompareTensors(ddp.final_checkpoint, sharded.final_checkpoint,
                                              /*exact=*/false, "final.ckpt, accumulation");
    EXPECT_GT(loss_diff + tensor_diff, 0.0) << "the summation orders differ: not bit for bit";
    std::cout << strategy << " vs ddp, 2 micro-batches a step, " << kEquivalenceSteps
              << " steps: worst relative difference of losses " << loss_diff << ", of final "
              << "tensors " << tensor_diff << "\n";
    ExpectMeasuredIsPredicted(sharded, spec);
  }
  {
    const v1::JobSpec ddp_spec = with("ddp", "unused", kUnused);
    const v1::JobSpec spec = with(strategy, "unused", kUnused);
    const TrainingRun ddp = Train(ddp_spec, Backend::kGloo);
    const TrainingRun sharded = Train(spec, Backend::kGloo);
    if (::testing::Test::HasFailure()) return;
    CompareSteps(ddp, sharded, 2, /*exact=*/true, unused_collectives,
                 "the reduce-scatters (and gathers), the stats all-reduce");
    CompareTensors(ddp.final_checkpoint, sharded.final_checkpoint, /*exact=*/true,
                   "final.ckpt, unused parameter");
  }
  {
    const v1::JobSpec ddp_spec = with("ddp", "bf16", kBf16);
    const v1::JobSpec spec = with(strategy, "bf16", kBf16);
    const TrainingRun ddp = Train(ddp_spec, Backend::kGloo);
    const TrainingRun sharded = Train(spec, Backend::kGloo);
    if (::testing::Test::HasFailure()) return;
    CompareSteps(ddp, sharded, 2, /*exact=*/true, unused_collectives,
                 "the bf16 reduce-scatters (and gathers), the stats all-reduce");
    CompareTensors(ddp.final_checkpoint, sharded.final_checkpoint, /*exact=*/true,
                   "final.ckpt, bf16 communication");
    ExpectMeasuredIsPredicted(sharded, spec);
  }
}

}  // namespace equivalence
}  // namespace ringleader
