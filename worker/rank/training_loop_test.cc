// The rank's training loop in-process: ranks as threads, gloo over loopback through one
// InMemoryKeyValueStore, and a fake coordinator that records what the ranks report.
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint.h"
#include "common/job_spec.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/memory_plan.h"
#include "worker/checkpoint/training_state.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/data/dataset.h"
#include "worker/rank/progress_reporter.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using testing_util::Watchdog;

// A small synthetic job both ranks can train in well under a second.
v1::JobSpec SmallSpec() {
  v1::JobSpec spec;
  spec.set_name("small");
  spec.set_world_size(2);
  spec.set_backend("gloo");
  for (uint32_t width : {16u, 32u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(512);
  spec.mutable_data()->set_max_test_examples(256);
  spec.set_epochs(2);
  spec.set_batch_size(16);
  spec.set_drift_interval_steps(5);
  spec.set_collective_timeout_ms(20000);
  spec.mutable_optimizer()->set_learning_rate(0.05);
  // Two buckets at this model size, so overlap and bucket order are exercised.
  spec.mutable_sync()->set_first_bucket_mb(0.001);
  spec.mutable_sync()->set_bucket_cap_mb(0.002);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

class TrainingLoopTest : public ::testing::Test {
 protected:
  // Runs every rank of `spec` on its own thread; returns each rank's RunRank result.
  std::vector<RankRunResult> RunRanks(const v1::JobSpec& spec,
                                      std::vector<uint32_t> ranks = {},
                                      std::function<void(uint32_t, TrainingLoopOptions*)> tweak =
                                          nullptr) {
    fake_ = std::make_unique<FakeCoordinator>(JobSpecFingerprint(spec));
    return RunRanksOverGloo(spec, fake_.get(), std::move(ranks), tweak);
  }

  std::unique_ptr<FakeCoordinator> fake_;
};

TEST_F(TrainingLoopTest, TwoRanksTrainInLockstepWithoutDrift) {
  Watchdog watchdog(absl::Seconds(60), "two-rank training");
  v1::JobSpec spec = SmallSpec();
  spec.set_checkpoint_dir(
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "checkpoints").string());
  std::vector<RankRunResult> results = RunRanks(spec);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].status.ok()) << "rank " << rank << ": " << results[rank].status;
    EXPECT_TRUE(results[rank].finish_reported);
    EXPECT_EQ(fake_->join(rank).spec_fingerprint(), JobSpecFingerprint(spec));
    EXPECT_EQ(fake_->join(rank).worker_id(), absl::StrCat("w", rank));
    ASSERT_EQ(fake_->finishes(rank).size(), 1u);
    EXPECT_TRUE(fake_->finishes(rank)[0].ok());
  }
  const std::vector<v1::StepReport> s0 = fake_->steps(0);
  const std::vector<v1::StepReport> s1 = fake_->steps(1);
  // 512 examples / 2 ranks / 16 per batch = 16 steps per epoch, 2 epochs.
  ASSERT_EQ(s0.size(), 32u);
  ASSERT_EQ(s1.size(), 32u);
  int drift_checks = 0;
  for (size_t i = 0; i < s0.size(); ++i) {
    EXPECT_EQ(s0[i].step(), i + 1);
    EXPECT_EQ(s1[i].step(), i + 1);
    EXPECT_EQ(s0[i].total_steps(), 32u);  // 2 epochs x 16 steps, known from the start
    // Every rank steps with the same all-reduced gradients, bit for bit ...
    EXPECT_EQ(s0[i].synced_grad_norm(), s1[i].synced_grad_norm()) << "step " << i + 1;
    // ... which are not what either rank computed alone.
    EXPECT_NE(s0[i].local_grad_norm(), s1[i].local_grad_norm()) << "step " << i + 1;
    EXPECT_EQ(s0[i].collective_digest(), s1[i].collective_digest());
    EXPECT_GT(s0[i].collectives(), 0u);
    EXPECT_EQ(s0[i].has_drift(), s1[i].has_drift());
    if (s0[i].has_drift()) {
      ++drift_checks;
      EXPECT_EQ(s0[i].drift(), 0.0) << "step " << i + 1;
      EXPECT_EQ(s1[i].drift(), 0.0) << "step " << i + 1;
    }
  }
  // Steps 5, 10, ..., 30 and the last one (32).
  EXPECT_EQ(drift_checks, 7);
  EXPECT_TRUE(s0.back().has_drift());
  EXPECT_LT(s0.back().loss(), s0.front().loss() * 0.8);

  const std::vector<v1::EpochReport> epochs = fake_->epochs(0);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_TRUE(fake_->epochs(1).empty()) << "only rank 0 evaluates";
  EXPECT_GT(epochs[1].test_accuracy(), 0.5);  // 4 classes: chance is 0.25
  EXPECT_LT(epochs[1].train_loss(), epochs[0].train_loss());

  const std::string checkpoint = fake_->finishes(0)[0].checkpoint_path();
  EXPECT_EQ(checkpoint, spec.checkpoint_dir() + "/job-1/final.ckpt");
  EXPECT_TRUE(fake_->finishes(1)[0].checkpoint_path().empty());
  absl::StatusOr<CheckpointData> loaded = ReadCheckpoint(checkpoint);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 32u);
  EXPECT_EQ(loaded->spec_fingerprint, JobSpecFingerprint(spec));
  EXPECT_NE(loaded->FindTensor("fc1.weight"), nullptr);
}

// Epoch-end evaluation must not leave peers waiting in a collective for longer than the
// collective timeout: a user's collective_timeout_ms of 1000 against rank 0 evaluating the full
// 10k test set alone made the other ranks' next all-reduce fail with DEADLINE_EXCEEDED. Here
// evaluation is made slow: each evaluating rank's hook waits (bounded, 5 s, far beyond the 1 s
// timeout) until every rank is evaluating. That returns at once only when peers evaluate at
// the same point instead of running into the next step's collective.
TEST_F(TrainingLoopTest, SlowEpochEndEvaluationDoesNotTimeOutThePeers) {
  Watchdog watchdog(absl::Seconds(60), "slow evaluation");
  v1::JobSpec spec = SmallSpec();
  spec.set_collective_timeout_ms(1000);
  spec.set_checkpoint_dir(
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "eval-checkpoints").string());
  absl::Mutex mu;
  std::map<uint32_t, int> evaluating;                       // epoch -> ranks evaluating
  std::map<std::pair<uint32_t, uint32_t>, size_t> examples;  // (rank, epoch) -> examples
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t rank, TrainingLoopOptions* options) {
        options->before_evaluation = [&, rank](uint32_t epoch, size_t n) {
          absl::MutexLock lock(&mu);
          examples[{rank, epoch}] = n;
          ++evaluating[epoch];
          auto everyone = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return evaluating[epoch] == 2; };
          mu.AwaitWithTimeout(absl::Condition(&everyone), absl::Seconds(5));
        };
      });
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(results[rank].status.ok()) << "rank " << rank << ": " << results[rank].status;
  }
  if (HasFailure()) return;
  {
    absl::MutexLock lock(&mu);
    for (uint32_t epoch = 0; epoch < 2; ++epoch) {
      // 256 test examples, half each.
      EXPECT_EQ(examples[std::make_pair(0u, epoch)], 128u) << "epoch " << epoch;
      EXPECT_EQ(examples[std::make_pair(1u, epoch)], 128u) << "epoch " << epoch;
    }
  }
  // The report still covers the whole test set: it equals evaluating the final model (the
  // checkpoint) on all 256 test examples.
  const std::vector<v1::EpochReport> epochs = fake_->epochs(0);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_TRUE(fake_->epochs(1).empty()) << "only rank 0 reports epochs";
  absl::StatusOr<CheckpointData> loaded = ReadCheckpoint(fake_->finishes(0)[0].checkpoint_path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<size_t> layers(spec.model().layers().begin(), spec.model().layers().end());
  Mlp model(layers, spec.seed());
  SgdOptions sgd;
  sgd.lr = spec.optimizer().learning_rate();
  sgd.momentum = spec.optimizer().momentum();
  sgd.dampening = spec.optimizer().dampening();
  sgd.weight_decay = spec.optimizer().weight_decay();
  sgd.nesterov = spec.optimizer().nesterov();
  SgdOptimizer optimizer(model.parameters(), sgd);
  ASSERT_TRUE(RestoreTrainingState(*loaded, "", &model, &optimizer).ok());
  const Dataset all = MakeSyntheticDataset(512 + 256, 16, 4, spec.seed());
  Dataset test;
  test.size = 256;
  test.features = all.features;
  test.num_classes = all.num_classes;
  test.x.assign(all.x.begin() + 512 * all.features, all.x.end());
  test.y.assign(all.y.begin() + 512, all.y.end());
  const Mlp::EvalResult expected = model.Evaluate(test, 256);
  EXPECT_EQ(expected.examples, 256u);
  EXPECT_EQ(epochs[1].test_accuracy(), expected.accuracy);
  EXPECT_NEAR(epochs[1].test_loss(), expected.loss, 1e-5 * std::max(1.0, expected.loss));
}

TEST_F(TrainingLoopTest, BypassedSyncOnOneRankShowsUpAsDrift) {
  Watchdog watchdog(absl::Seconds(60), "bypass");
  v1::JobSpec spec = SmallSpec();
  spec.set_epochs(1);
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  std::vector<RankRunResult> results = RunRanks(spec);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;
  const std::vector<v1::StepReport> s0 = fake_->steps(0);
  const std::vector<v1::StepReport> s1 = fake_->steps(1);
  ASSERT_EQ(s0.size(), 16u);
  ASSERT_TRUE(s0.back().has_drift());
  EXPECT_GT(s0.back().drift(), 0.0);
  EXPECT_FALSE(s0.back().drift_parameter().empty());
  EXPECT_EQ(s0.back().drift(), s1.back().drift()) << "every rank gets the same verdict";
  // The bypassing rank steps with its local gradients.
  EXPECT_EQ(s1.back().synced_grad_norm(), s1.back().local_grad_norm());
  EXPECT_NE(s0.back().synced_grad_norm(), s1.back().synced_grad_norm());
}

// The motivating bug: every rank computes its loss on the unwrapped model. No rank runs the
// reducer, so no collective carries gradients; each rank steps with its own and they drift.
TEST_F(TrainingLoopTest, EveryRankBypassingSyncIssuesNoGradientCollective) {
  Watchdog watchdog(absl::Seconds(60), "bypass all");
  v1::JobSpec spec = SmallSpec();
  spec.set_epochs(1);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_all_ranks(true);
  std::vector<RankRunResult> results = RunRanks(spec);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].status.ok()) << results[rank].status;
    for (const v1::StepReport& step : fake_->steps(rank)) {
      EXPECT_EQ(step.collectives(), 0u) << "rank " << rank << " step " << step.step();
      // The same gradients, summed in another order: equal to rounding.
      EXPECT_NEAR(step.synced_grad_norm(), step.local_grad_norm(), 1e-9 * step.local_grad_norm())
          << "step " << step.step();
    }
  }
  const std::vector<v1::StepReport> s0 = fake_->steps(0);
  ASSERT_FALSE(s0.empty());
  ASSERT_TRUE(s0.back().has_drift());
  EXPECT_GT(s0.back().drift(), 0.0);
  EXPECT_NE(s0.back().synced_grad_norm(), fake_->steps(1).back().synced_grad_norm());
}

TEST_F(TrainingLoopTest, ANanLossIsReportedWithItsStepBeforeTheRankFails) {
  Watchdog watchdog(absl::Seconds(60), "nan loss");
  v1::JobSpec spec = SmallSpec();
  spec.mutable_model()->mutable_faults()->set_nan_loss_rank(1);
  spec.mutable_model()->mutable_faults()->set_nan_loss_at_step(3);
  spec.set_collective_timeout_ms(2000);
  std::vector<RankRunResult> results = RunRanks(spec);
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kFailedPrecondition) << results[1].status;
  EXPECT_THAT(std::string(results[1].status.message()), HasSubstr("step 3"));
  EXPECT_THAT(std::string(results[1].status.message()), HasSubstr("training diverged"));
  // The job's own fault, at the step it happened in.
  ASSERT_EQ(fake_->finishes(1).size(), 1u);
  EXPECT_EQ(fake_->finishes(1)[0].failure().kind(), v1::RankFailure::JOB_ERROR);
  EXPECT_EQ(fake_->finishes(1)[0].failure().step(), 3u);
  const std::vector<v1::StepReport> s1 = fake_->steps(1);
  ASSERT_FALSE(s1.empty());
  EXPECT_EQ(s1.back().step(), 3u);
  EXPECT_TRUE(std::isnan(s1.back().loss()));
}

TEST_F(TrainingLoopTest, UnusedParameterWithoutFindUnusedFailsEveryRankNamingIt) {
  Watchdog watchdog(absl::Seconds(60), "unused parameter");
  v1::JobSpec spec = SmallSpec();
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc1.bias");
  std::vector<RankRunResult> results = RunRanks(spec);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank].status.code(), absl::StatusCode::kFailedPrecondition)
        << results[rank].status;
    EXPECT_THAT(std::string(results[rank].status.message()), HasSubstr("fc1.bias"));
    EXPECT_THAT(std::string(results[rank].status.message()), HasSubstr("step 1"));
    ASSERT_EQ(fake_->finishes(rank).size(), 1u);
    EXPECT_FALSE(fake_->finishes(rank)[0].ok());
    EXPECT_THAT(fake_->finishes(rank)[0].error(), HasSubstr("fc1.bias"));
  }
}

TEST_F(TrainingLoopTest, UnusedParameterWithFindUnusedTrains) {
  Watchdog watchdog(absl::Seconds(60), "find unused");
  v1::JobSpec spec = SmallSpec();
  spec.set_epochs(1);
  spec.mutable_sync()->set_find_unused_parameters(true);
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc1.bias");
  std::vector<RankRunResult> results = RunRanks(spec);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;
  EXPECT_EQ(fake_->steps(0).back().drift(), 0.0);
}

// Each rank's measured memory (its outcome and its first step's report) is what
// plan/memory_plan.h predicts for it, byte for byte (the heap's growth aside: never predicted,
// and these ranks share one heap; HeapGrowthCoversWhatTheRankHolds checks it).
void ExpectMemoryAsPredicted(v1::JobSpec spec, const std::vector<RankRunResult>& results) {
  ApplyJobSpecDefaults(&spec);
  for (uint32_t rank = 0; rank < results.size(); ++rank) {
    absl::StatusOr<v1::RankMemory> predicted =
        PredictRankMemory(spec, spec.strategy(), spec.world_size(), rank);
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    v1::RankMemory measured = results[rank].outcome.memory;
    measured.clear_allocator_bytes();
    EXPECT_EQ(measured.SerializeAsString(), predicted->SerializeAsString())
        << "rank " << rank << ": measured " << measured.ShortDebugString()
        << ", predicted " << predicted->ShortDebugString();
  }
}

TEST_F(TrainingLoopTest, FrozenParametersStayOutOfTheReducerAndDoNotChange) {
  Watchdog watchdog(absl::Seconds(60), "frozen");
  v1::JobSpec spec = SmallSpec();
  spec.set_epochs(1);
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  spec.set_checkpoint_dir(
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "frozen").string());
  std::vector<RankRunResult> results = RunRanks(spec);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;
  absl::StatusOr<CheckpointData> loaded = ReadCheckpoint(results[0].outcome.checkpoint_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Mlp fresh({16, 32, 4}, spec.seed());
  const CheckpointTensor* weight = loaded->FindTensor("fc1.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->data, std::vector<float>(fresh.param(0), fresh.param(0) + 16 * 32));
  const CheckpointTensor* bias = loaded->FindTensor("fc1.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_NE(bias->data, std::vector<float>(fresh.param(1), fresh.param(1) + 32));
  // fc1.weight has neither a gradient slot nor momentum.
  ExpectMemoryAsPredicted(spec, results);
}

// RankMemory.allocator_bytes: the heap grew by at least the buffers the rank counts, and by less
// than those plus a second copy of the gradients (the model's own storage is released once its
// gradients are bound to the reducer's buckets). One rank, so no other rank's thread allocates
// or frees in the same heap meanwhile; buffers of 4 MiB, so activations (about 1 MiB) stay
// below that copy.
TEST_F(TrainingLoopTest, HeapGrowthCoversWhatTheRankHoldsAndNoSecondGradientCopy) {
  Watchdog watchdog(absl::Seconds(60), "heap growth");
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  spec.mutable_model()->clear_layers();
  for (uint32_t width : {16u, 1024u, 1024u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.set_epochs(1);
  spec.set_max_steps(2);
  std::vector<RankRunResult> results = RunRanks(spec);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  const v1::RankMemory& memory = results[0].outcome.memory;
  EXPECT_GT(memory.optimizer_bytes(), 4u << 20);
  EXPECT_GE(memory.allocator_bytes(), memory.total_bytes());
  EXPECT_LT(memory.allocator_bytes(), memory.total_bytes() + memory.parameter_bytes())
      << memory.ShortDebugString();
}

TEST_F(TrainingLoopTest, GradientAccumulationAndBf16StillAgreeAcrossRanks) {
  Watchdog watchdog(absl::Seconds(60), "accumulation");
  v1::JobSpec spec = SmallSpec();
  spec.set_epochs(1);
  spec.mutable_sync()->set_gradient_accumulation_steps(2);
  spec.mutable_sync()->set_comm_dtype("bf16");
  spec.mutable_model()->set_with_buffers(true);  // buffer broadcast every step too
  std::vector<RankRunResult> results = RunRanks(spec);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;
  const auto s0 = fake_->steps(0);
  const auto s1 = fake_->steps(1);
  ASSERT_EQ(s0.size(), 8u);  // 16 micro-batches / 2
  for (size_t i = 0; i < s0.size(); ++i) {
    EXPECT_EQ(s0[i].synced_grad_norm(), s1[i].synced_grad_norm());
  }
  EXPECT_EQ(s0.back().drift(), 0.0);
  // The reducer's bf16 wire copy is counted as a communication buffer.
  ExpectMemoryAsPredicted(spec, results);
  EXPECT_GT(results[0].outcome.memory.comm_buffer_bytes(), 0u);
  ASSERT_TRUE(s0[0].has_memory());
  EXPECT_EQ(s0[0].memory().total_bytes(), results[0].outcome.memory.total_bytes());
}

// Each rank stops once the answer to the report batch holding step 3 says so, and sends nothing
// after it. (With every step reported at once the batch is usually step 3 alone; when the
// reporting thread wakes late, the steps queued meanwhile share the batch, so the last step
// received may be later than 3.)
TEST_F(TrainingLoopTest, StopFromTheCoordinatorEndsEveryRankAfterTheAnsweredBatch) {
  Watchdog watchdog(absl::Seconds(60), "stop");
  v1::JobSpec spec = SmallSpec();
  // The fake is created inside RunRanks; the tweak runs before its rank reports anything.
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t, TrainingLoopOptions* options) {
        options->reporting.max_steps = 1;  // every step is reported as soon as it is queued
        fake_->set_stop_at_step(3);
      });
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank].status.code(), absl::StatusCode::kAborted) << results[rank].status;
    EXPECT_THAT(std::string(results[rank].status.message()),
                HasSubstr("stopped by the coordinator: cancelled by the test"));
    EXPECT_EQ(FailureOf(results[rank].status).kind(), v1::RankFailure::STOPPED);
    EXPECT_GE(fake_->steps(rank).back().step(), 3u);
    EXPECT_LT(fake_->steps(rank).back().step(), 32u) << "stopped before the last of 32 steps";
    EXPECT_EQ(fake_->steps_after_stop(rank), 0) << "rank " << rank;
  }
}

TEST_F(TrainingLoopTest, MutatedSpecJoinsWithAnotherFingerprint) {
  v1::JobSpec spec = SmallSpec();
  std::vector<RankRunResult> results =
      RunRanks(spec, {1}, [](uint32_t, TrainingLoopOptions* options) {
        options->mutate_spec_for_test = true;
      });
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(results[1].status.message()), HasSubstr("rank 1: joining"));
  EXPECT_NE(fake_->join(1).spec_fingerprint(), JobSpecFingerprint(spec));
  ASSERT_EQ(fake_->finishes(1).size(), 1u);
  EXPECT_FALSE(fake_->finishes(1)[0].ok());
}

TEST_F(TrainingLoopTest, CrashFaultFiresOnItsRankAtItsStep) {
  Watchdog watchdog(absl::Seconds(60), "crash");
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  spec.mutable_model()->mutable_faults()->set_crash_rank(0);
  spec.mutable_model()->mutable_faults()->set_crash_at_step(4);
  std::vector<uint64_t> crashed_at;
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t, TrainingLoopOptions* options) {
        options->crash = [&](uint64_t step) {
          crashed_at.push_back(step);
          return absl::InternalError("crashed on purpose");
        };
      });
  EXPECT_THAT(crashed_at, ::testing::ElementsAre(4u));
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("rank 0, step 4 (epoch 0)"));
  EXPECT_EQ(fake_->steps(0).size(), 3u);
}

TEST_F(TrainingLoopTest, BatchLargerThanTheShardIsRejectedNamingTheFields) {
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  spec.set_batch_size(1024);
  spec.mutable_sync()->set_gradient_accumulation_steps(2);
  std::vector<RankRunResult> results = RunRanks(spec);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(results[0].status.message()),
              HasSubstr("batch_size x sync.gradient_accumulation_steps"));
  EXPECT_EQ(FailureOf(results[0].status).kind(), v1::RankFailure::JOB_ERROR);
}

TEST_F(TrainingLoopTest, PeerFailureWaitsForTheCulpritsReportBeforeReporting) {
  v1::JobSpec spec = SmallSpec();
  std::vector<absl::Duration> waits;
  std::vector<RankRunResult> results =
      RunRanks(spec, {0}, [&](uint32_t, TrainingLoopOptions* options) {
        fake_->set_over_after_probes(3);
        options->victim_report_delay = absl::Seconds(2);
        options->victim_probe_interval = absl::Milliseconds(100);
        options->sleep = [&](absl::Duration d) { waits.push_back(d); };
        options->make_collective = [](const v1::Assignment&, const ComputePlacement&,
                                      const RendezvousProgress&)
            -> absl::StatusOr<std::unique_ptr<Collective>> {
          // The backend says what it is: a peer that closed its connection (rank_failure.h).
          return WithFailureKind(absl::UnavailableError("Connection closed by peer"),
                                 v1::RankFailure::PEER_CLOSED, 1, "10.1.0.2:41729");
        };
      });
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fake_->probes(), 3);  // stopped probing once the attempt was over
  EXPECT_EQ(waits.size(), 2u);
  ASSERT_EQ(fake_->finishes(0).size(), 1u);
  EXPECT_FALSE(fake_->finishes(0)[0].ok());
  // The report carries the kind and the peer as detected.
  const v1::RankFailure failure = fake_->finishes(0)[0].failure();
  EXPECT_EQ(failure.kind(), v1::RankFailure::PEER_CLOSED);
  EXPECT_TRUE(failure.has_peer());
  EXPECT_EQ(failure.peer_rank(), 1u);
  EXPECT_EQ(failure.peer_address(), "10.1.0.2:41729");
}

TEST_F(TrainingLoopTest, PeerFailureReportsAfterTheDelayWhenNobodyElseDoes) {
  v1::JobSpec spec = SmallSpec();
  std::vector<absl::Duration> waits;
  std::vector<RankRunResult> results =
      RunRanks(spec, {0}, [&](uint32_t, TrainingLoopOptions* options) {
        options->victim_report_delay = absl::Milliseconds(500);
        options->victim_probe_interval = absl::Milliseconds(100);
        options->sleep = [&](absl::Duration d) { waits.push_back(d); };
        options->make_collective = [](const v1::Assignment&, const ComputePlacement&,
                                      const RendezvousProgress&)
            -> absl::StatusOr<std::unique_ptr<Collective>> {
          return WithFailureKind(absl::DeadlineExceededError("rank 1 never showed up"),
                                 v1::RankFailure::PEER_TIMED_OUT);
        };
      });
  EXPECT_EQ(waits.size(), 5u);
  ASSERT_EQ(fake_->finishes(0).size(), 1u);
  EXPECT_THAT(fake_->finishes(0)[0].error(), HasSubstr("rank 1 never showed up"));
  EXPECT_EQ(fake_->finishes(0)[0].failure().kind(), v1::RankFailure::PEER_TIMED_OUT);
}

TEST_F(TrainingLoopTest, OwnFailuresAreReportedWithoutDelay) {
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  spec.mutable_data()->set_dataset("no-such-set");
  std::vector<absl::Duration> waits;
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t, TrainingLoopOptions* options) {
        options->sleep = [&](absl::Duration d) { waits.push_back(d); };
      });
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("data.dataset"));
  EXPECT_TRUE(waits.empty());
  EXPECT_EQ(fake_->probes(), 0);
  ASSERT_EQ(fake_->finishes(0).size(), 1u);
  EXPECT_EQ(fake_->finishes(0)[0].failure().kind(), v1::RankFailure::JOB_ERROR);
}

// The coordinator is down for the whole run and comes back only while the rank retries its
// last reports: training never waited on it, and neither a step report nor the result is lost.
TEST_F(TrainingLoopTest, ACoordinatorOutageLosesNoReportAndNoResult) {
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  std::vector<absl::Duration> waits;
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t, TrainingLoopOptions* options) {
        fake_->set_unreachable(true);
        options->coordinator_grace = absl::Seconds(10);
        options->coordinator_retry_pause = absl::Seconds(1);
        options->sleep = [&](absl::Duration d) {
          waits.push_back(d);
          if (waits.size() == 3) fake_->set_unreachable(false);  // back after three pauses
        };
      });
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  EXPECT_EQ(waits.size(), 3u);
  const std::vector<v1::StepReport> steps = fake_->steps(0);
  ASSERT_EQ(steps.size(), results[0].outcome.steps);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].step(), i + 1);
  ASSERT_EQ(fake_->finishes(0).size(), 1u);
  EXPECT_TRUE(fake_->finishes(0)[0].ok());
  EXPECT_TRUE(results[0].finish_reported);
}

// Past the grace the rank gives up delivering and says why; the result is not reported.
TEST_F(TrainingLoopTest, ACoordinatorGoneForLongerThanTheGraceIsAReportingError) {
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  std::vector<absl::Duration> waits;
  std::vector<RankRunResult> results =
      RunRanks(spec, {}, [&](uint32_t, TrainingLoopOptions* options) {
        fake_->set_unreachable(true);
        options->coordinator_grace = absl::Seconds(3);
        options->coordinator_retry_pause = absl::Seconds(1);
        options->sleep = [&](absl::Duration d) { waits.push_back(d); };
      });
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("reporting"));
  // 3 pauses for the reports, 3 for the FinishRank (besides the victim delay's probes).
  EXPECT_EQ(std::count(waits.begin(), waits.end(), absl::Seconds(1)), 6);
  EXPECT_TRUE(fake_->finishes(0).empty());
  EXPECT_FALSE(results[0].finish_reported);
}

// data.shuffle false keeps the dataset's order: the first batches differ from the shuffled
// run's (same seed, same model), and the order is the same on a rerun.
TEST_F(TrainingLoopTest, ShuffleOffFeedsTheDatasetInItsOwnOrder) {
  v1::JobSpec spec = SmallSpec();
  spec.set_world_size(1);
  spec.set_epochs(1);
  auto first_losses = [&](bool shuffle) {
    spec.mutable_data()->set_shuffle(shuffle);
    std::vector<RankRunResult> results = RunRanks(spec);
    EXPECT_TRUE(results[0].status.ok()) << results[0].status;
    std::vector<double> losses;
    for (const v1::StepReport& step : fake_->steps(0)) {
      if (losses.size() < 3) losses.push_back(step.loss());
    }
    return losses;
  };
  const std::vector<double> in_order = first_losses(false);
  ASSERT_EQ(in_order.size(), 3u);
  EXPECT_EQ(first_losses(false), in_order);
  EXPECT_NE(first_losses(true), in_order);
}

}  // namespace
}  // namespace ringleader
