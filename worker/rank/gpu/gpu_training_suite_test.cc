// GPU suite for the rank's GPU path: the GPU model runner + reducer over CUDA memory + NCCL
// against the CPU runner + reducer over host memory + gloo, step by step (one GPU: world size 1;
// every GPU: data parallel), and whole nccl jobs through RunRank with a fake coordinator (among
// them zero2 and fsdp with gradient accumulation against the same jobs on CPU ranks).
// Every test starts with RL_SKIP_WITHOUT_GPU: without a GPU the suite skips with
// "no GPU: <reason>". Run on a GPU node:
//   bazel test --config=gpu //worker/rank/gpu:gpu_training_suite_test
// Tolerances: worker/trainer/gpu_tolerances.h (docs/gpu.md explains them).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "common/gpu/gpu_test_util.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gpu/nccl_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/rank_threads.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/data/dataset.h"
#include "worker/rank/cpu_model_runner.h"
#include "worker/rank/gpu/gpu_model_runner.h"
#include "worker/rank/attempt_test_util.h"
#include "worker/rank/training_loop.h"
#include "worker/sync/reducer.h"
#include "worker/trainer/gpu_tolerances.h"

namespace ringleader {
namespace {

using gpu::GpuCount;
using gpu::kFp32ParamAtol;
using gpu::kFp32Rtol;

const std::vector<size_t> kLayers = {24, 32, 16, 5};
constexpr size_t kBatch = 16;
constexpr int kSteps = 4;

SgdOptions Sgd() {
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  return o;
}

struct StepFigures {
  double loss = 0, local_norm = 0, synced_norm = 0;
};

// One training step the way training_loop.cc runs it.
absl::StatusOr<StepFigures> Step(ModelRunner* runner, Reducer* reducer, const Dataset& data,
                                 size_t first) {
  reducer->ZeroGradients();
  reducer->BeginMicroBatch(0);
  BackwardOptions backward;
  backward.on_ready = [&](size_t i) {
    runner->NoteLocalGradient(i);
    reducer->MarkReady(i);
  };
  StepFigures f;
  absl::StatusOr<double> loss =
      runner->ForwardBackward(data.example(first), &data.y[first], kBatch, backward);
  if (!loss.ok()) return loss.status();
  f.loss = *loss;
  absl::StatusOr<double> local = runner->TakeLocalSquaredNorm();
  if (!local.ok()) return local.status();
  f.local_norm = std::sqrt(*local);
  if (absl::Status s = reducer->FinishStep(nullptr); !s.ok()) return s;
  const std::vector<bool> all(runner->parameters().size(), true);
  absl::StatusOr<double> synced = runner->GradNorm(all);
  if (!synced.ok()) return synced.status();
  f.synced_norm = *synced;
  if (absl::Status s = runner->OptimizerStep(all); !s.ok()) return s;
  return f;
}

struct RankTrace {
  std::string error;
  std::vector<StepFigures> steps;
  CheckpointData state;
};

// kSteps data-parallel steps of rank `rank` of `world` (shard: batch rank of each step).
RankTrace Train(ModelRunner* runner, Collective* comm, int rank, int world, const Dataset& data) {
  RankTrace t;
  ReducerOptions o;
  o.first_bucket_mb = 0.001;  // a few buckets, launched during backward
  o.bucket_cap_mb = 0.004;
  o.memory = runner->memory();
  auto reducer = Reducer::Create(comm, runner->parameters(), o);
  if (!reducer.ok()) {
    t.error = reducer.status().ToString();
    return t;
  }
  runner->BindGradients((*reducer)->gradient_slots());
  for (int s = 0; s < kSteps; ++s) {
    auto f = Step(runner, reducer->get(), data, (s * world + rank) * kBatch);
    if (!f.ok()) {
      t.error = f.status().ToString();
      return t;
    }
    t.steps.push_back(*f);
    if ((*reducer)->layout_changed()) runner->BindGradients((*reducer)->gradient_slots());
  }
  auto state = runner->CaptureState(kSteps, 0, "fp");
  if (!state.ok()) t.error = state.status().ToString();
  if (state.ok()) t.state = *state;
  return t;
}

void ExpectRunnersAgree(int world) {
  const Dataset data = MakeSyntheticDataset(kBatch * world * kSteps, kLayers[0], 5, 17);
  std::vector<RankTrace> cpu(world), gpu(world);
  GlooOptions gloo;
  gloo.collective_timeout = absl::Seconds(30);
  auto gloo_store = std::make_shared<InMemoryKeyValueStore>();
  RunRanks(world, [&](int r) {
    auto comm = CreateGlooCollective(gloo_store, "suite/cpu/", r, world, gloo);
    if (!comm.ok()) {
      cpu[r].error = comm.status().ToString();
      return;
    }
    auto runner = CreateCpuModelRunner(std::make_unique<Mlp>(kLayers, 3), Sgd());
    cpu[r] = Train(runner.get(), comm->get(), r, world, data);
  });
  auto store = std::make_shared<InMemoryKeyValueStore>();
  RunRanks(
      world,
      [&](int r) {
        GpuRunnerOptions g;
        g.gpu = r;
        auto runner = CreateGpuModelRunner(std::make_unique<Mlp>(kLayers, 3), Sgd(), g);
        if (!runner.ok()) {
          gpu[r].error = runner.status().ToString();
          return;
        }
        gpu::NcclOptions nccl;
        nccl.compute_stream = static_cast<cudaStream_t>((*runner)->placement().compute_stream);
        auto comm = gpu::CreateNcclCollective(store, "suite/gpu/", r, world, r, nccl);
        if (!comm.ok()) {
          gpu[r].error = comm.status().ToString();
          return;
        }
        gpu[r] = Train(runner->get(), comm->get(), r, world, data);
      },
      absl::Seconds(240));
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(cpu[r].error, "") << "cpu rank " << r;
    ASSERT_EQ(gpu[r].error, "") << "gpu rank " << r;
    ASSERT_EQ(gpu[r].steps.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s) {
      const StepFigures& c = cpu[r].steps[s];
      const StepFigures& g = gpu[r].steps[s];
      EXPECT_NEAR(g.loss, c.loss, kFp32Rtol * std::fabs(c.loss)) << "rank " << r << " step " << s;
      EXPECT_NEAR(g.local_norm, c.local_norm, kFp32Rtol * c.local_norm) << "step " << s;
      EXPECT_NEAR(g.synced_norm, c.synced_norm, kFp32Rtol * c.synced_norm) << "step " << s;
      // Every GPU rank steps with the same all-reduced gradients, bit for bit.
      EXPECT_EQ(g.synced_norm, gpu[0].steps[s].synced_norm) << "rank " << r << " step " << s;
      if (world > 1) {
        EXPECT_NE(g.local_norm, g.synced_norm) << "the gradients were averaged";
      }
    }
    // Parameters and momentum buffers, through the checkpoint capture (a device-to-host copy).
    ASSERT_EQ(gpu[r].state.tensors.size(), cpu[r].state.tensors.size());
    for (size_t t = 0; t < cpu[r].state.tensors.size(); ++t) {
      const CheckpointTensor& c = cpu[r].state.tensors[t];
      const CheckpointTensor& g = gpu[r].state.tensors[t];
      ASSERT_EQ(g.name, c.name);
      ASSERT_EQ(g.data.size(), c.data.size());
      double worst = 0;
      for (size_t k = 0; k < c.data.size(); ++k) {
        worst = std::max(worst, std::fabs(static_cast<double>(g.data[k]) - c.data[k]));
      }
      EXPECT_LE(worst, kFp32ParamAtol) << c.name << " on rank " << r;
    }
  }
}

TEST(GpuTrainingSuite, OneGpuRunnerStepsMatchTheCpuRunner) {
  RL_SKIP_WITHOUT_GPU(1);
  ExpectRunnersAgree(1);
}

TEST(GpuTrainingSuite, DataParallelRunnerStepsOnEveryGpuMatchTheCpuRunnersOverGloo) {
  RL_SKIP_WITHOUT_GPU(2);
  ExpectRunnersAgree(GpuCount());
}

v1::JobSpec SuiteSpec(const std::string& backend, int world) {
  v1::JobSpec spec;
  spec.set_name("suite");
  spec.set_world_size(world);
  spec.set_backend(backend);
  for (uint32_t width : {16u, 32u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(256 * world);
  spec.mutable_data()->set_max_test_examples(256);
  spec.set_epochs(2);
  spec.set_batch_size(16);
  spec.set_drift_interval_steps(5);
  spec.set_collective_timeout_ms(30000);
  spec.mutable_optimizer()->set_learning_rate(0.05);
  spec.mutable_sync()->set_first_bucket_mb(0.001);
  spec.mutable_sync()->set_bucket_cap_mb(0.002);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

struct JobRun {
  std::vector<RankRunResult> results;
  std::unique_ptr<FakeCoordinator> coordinator;
};

// Every rank of `spec` as a thread through RunRank: gloo ranks on the CPU, nccl rank r on GPU r.
JobRun RunJob(const v1::JobSpec& spec) {
  JobRun run;
  const int world = static_cast<int>(spec.world_size());
  run.coordinator = std::make_unique<FakeCoordinator>(JobSpecFingerprint(spec));
  run.results.resize(world);
  auto store = std::make_shared<InMemoryKeyValueStore>();
  RunRanks(
      world,
      [&](int r) {
        v1::Assignment a;
        a.set_job_id(absl::StrCat("suite-", spec.backend()));
        a.set_generation(1);
        a.set_rank(r);
        a.set_world_size(world);
        *a.mutable_spec() = spec;
        TrainingLoopOptions options;
        options.worker_id = absl::StrCat("w", r);
        options.gpu = spec.backend() == "nccl" ? r : -1;
        options.log = [](const std::string&) {};
        options.make_collective =
            [store](
                const v1::Assignment& assignment, const ComputePlacement& placement,
                const RendezvousProgress&) -> absl::StatusOr<std::unique_ptr<Collective>> {
          const std::string prefix = absl::StrCat(assignment.job_id(), "/1/");
          const int rank = static_cast<int>(assignment.rank());
          const int world = static_cast<int>(assignment.world_size());
          if (assignment.spec().backend() == "gloo") {
            GlooOptions gloo;
            gloo.collective_timeout = absl::Seconds(30);
            return CreateGlooCollective(store, prefix, rank, world, gloo);
          }
          gpu::NcclOptions nccl;
          nccl.compute_stream = static_cast<cudaStream_t>(placement.compute_stream);
          return gpu::CreateNcclCollective(store, prefix, rank, world, placement.gpu, nccl);
        };
        run.results[r] = RunRank(a, run.coordinator.get(), options);
      },
      absl::Seconds(300));
  return run;
}

TEST(GpuTrainingSuite, NcclJobRunsEndToEndThroughRunRank) {
  RL_SKIP_WITHOUT_GPU(1);
  const int world = GpuCount();
  for (const bool bf16 : {false, true}) {
    v1::JobSpec spec = SuiteSpec("nccl", world);
    spec.set_checkpoint_dir(
        (std::filesystem::path(std::getenv("TEST_TMPDIR")) / (bf16 ? "bf16" : "fp32")).string());
    if (bf16) {
      spec.set_mixed_precision("bf16");
      spec.mutable_sync()->set_comm_dtype("bf16");
      spec.mutable_sync()->set_gradient_accumulation_steps(2);
    }
    const std::string what = bf16 ? "bf16" : "fp32";
    JobRun nccl = RunJob(spec);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(nccl.results[r].status.ok())
          << what << " rank " << r << ": " << nccl.results[r].status;
      ASSERT_EQ(nccl.coordinator->finishes(r).size(), 1u);
      EXPECT_TRUE(nccl.coordinator->finishes(r)[0].ok());
    }
    const auto s0 = nccl.coordinator->steps(0);
    ASSERT_EQ(s0.size(), bf16 ? 16u : 32u) << what;  // 256 examples / 16 per batch x 2 epochs
    for (int r = 1; r < world; ++r) {
      const auto sr = nccl.coordinator->steps(r);
      ASSERT_EQ(sr.size(), s0.size());
      for (size_t i = 0; i < s0.size(); ++i) {
        EXPECT_EQ(sr[i].synced_grad_norm(), s0[i].synced_grad_norm()) << what << " step " << i;
        EXPECT_EQ(sr[i].collective_digest(), s0[i].collective_digest());
      }
    }
    int drift_checks = 0;
    for (const v1::StepReport& s : s0) {
      if (!s.has_drift()) continue;
      ++drift_checks;
      EXPECT_EQ(s.drift(), 0.0) << what << " step " << s.step();
    }
    EXPECT_GT(drift_checks, 0);
    EXPECT_LT(s0.back().loss(), s0.front().loss() * 0.8) << what;
    const auto epochs = nccl.coordinator->epochs(0);
    ASSERT_EQ(epochs.size(), 2u);
    EXPECT_GT(epochs[1].test_accuracy(), 0.5) << what;  // 4 classes: chance is 0.25
    auto checkpoint = ReadCheckpoint(nccl.coordinator->finishes(0)[0].checkpoint_path());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ(checkpoint->step, s0.size());
    // The momentum buffers came back from the device (the spec's default momentum is 0.9).
    EXPECT_NE(checkpoint->FindTensor("fc1.weight.momentum_buffer"), nullptr);
    if (bf16) continue;
    // The same job on CPU ranks over gloo: same first step (same weights, same shard).
    JobRun gloo = RunJob(SuiteSpec("gloo", world));
    ASSERT_TRUE(gloo.results[0].status.ok()) << gloo.results[0].status;
    const auto c0 = gloo.coordinator->steps(0);
    ASSERT_EQ(c0.size(), s0.size());
    EXPECT_NEAR(s0[0].loss(), c0[0].loss(), kFp32Rtol * c0[0].loss());
    EXPECT_NEAR(s0[0].synced_grad_norm(), c0[0].synced_grad_norm(),
                kFp32Rtol * c0[0].synced_grad_norm());
  }
}

// Snapshots in memory on the GPU: CaptureState reads the state back from the device every
// step, a crash before step 10 leaves the snapshot of step 9, and generation 2 uploads it and
// continues as the uninterrupted run (on 2+ GPUs rank 0's snapshot is removed first, so it is
// healed over NCCL from rank 1).
TEST(GpuTrainingSuite, ACrashResumesFromTheSnapshotOfTheLastStepOnTheGpu) {
  RL_SKIP_WITHOUT_GPU(1);
  const int world = GpuCount();
  const std::filesystem::path root =
      std::filesystem::path(std::getenv("TEST_TMPDIR")) / "gpu-snapshots";
  auto spec_for = [&](bool crash) {
    v1::JobSpec spec = SuiteSpec("nccl", world);
    spec.set_snapshot_interval_steps(1);
    if (crash) {
      spec.mutable_model()->mutable_faults()->set_crash_rank(world - 1);
      spec.mutable_model()->mutable_faults()->set_crash_at_step(10);
    }
    return spec;
  };
  auto store = std::make_shared<InMemoryKeyValueStore>();  // keys per generation
  const auto on_gpus = [&](uint32_t rank, TrainingLoopOptions* options) {
    options->gpu = static_cast<int>(rank);
    options->snapshot_dir = (root / absl::StrCat("worker-", rank) / "job-1").string();
    options->make_collective =
        [store](const v1::Assignment& a, const ComputePlacement& placement,
                const RendezvousProgress&) -> absl::StatusOr<std::unique_ptr<Collective>> {
      gpu::NcclOptions nccl;
      nccl.compute_stream = static_cast<cudaStream_t>(placement.compute_stream);
      return gpu::CreateNcclCollective(
          store, absl::StrCat("job-1/", a.generation(), "/"),
          static_cast<int>(a.rank()), static_cast<int>(a.world_size()), placement.gpu, nccl);
    };
  };
  const AttemptResult reference = RunAttempt(spec_for(false), 1, on_gpus);
  ASSERT_TRUE(reference.results[0].status.ok()) << reference.results[0].status;
  std::filesystem::remove_all(root);
  const v1::JobSpec spec = spec_for(true);
  const AttemptResult crashed = RunAttempt(spec, 1, on_gpus);
  ASSERT_FALSE(crashed.results[world - 1].status.ok());
  if (world > 1) std::filesystem::remove_all(root / "worker-0");
  const AttemptResult resumed = RunAttempt(spec, 2, on_gpus);
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(resumed.results[r].status.ok()) << "rank " << r << ": " << resumed.results[r].status;
    const auto& steps = resumed.steps[r];
    ASSERT_EQ(steps.size(), reference.steps[r].size() - 9) << "rank " << r;
    EXPECT_EQ(steps[0].resumed_from_step(), 9u);
    for (size_t k = 0; k < steps.size(); ++k) {
      const v1::StepReport& want = reference.steps[r][9 + k];
      EXPECT_EQ(steps[k].step(), want.step());
      EXPECT_NEAR(steps[k].loss(), want.loss(), kFp32Rtol * want.loss()) << "step " << want.step();
    }
  }
}

// strategies zero2 and fsdp with gradient accumulation reduce-scatter every micro-batch's
// gradients on their own, noting each micro-batch's local gradients: the step's local norm adds
// every note (the CPU runner's sum). The GPU runner's local_grad_norm (NoteLocalGradient on the
// device) against the CPU runner's in the same job over gloo, the first steps within kFp32Rtol:
// the last micro-batch's norm alone would be about 30% low.
TEST(GpuTrainingSuite, ShardedLocalNormsUnderAccumulationMatchTheCpuRunner) {
  RL_SKIP_WITHOUT_GPU(1);
  const int world = GpuCount();
  for (const std::string strategy : {"zero2", "fsdp"}) {
    const auto spec_for = [&](const std::string& backend) {
      v1::JobSpec spec = SuiteSpec(backend, world);
      spec.set_strategy(strategy);
      spec.set_epochs(1);
      spec.mutable_sync()->set_gradient_accumulation_steps(2);
      return spec;
    };
    const JobRun nccl = RunJob(spec_for("nccl"));
    const JobRun gloo = RunJob(spec_for("gloo"));
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(nccl.results[r].status.ok())
          << strategy << " nccl rank " << r << ": " << nccl.results[r].status;
      ASSERT_TRUE(gloo.results[r].status.ok())
          << strategy << " gloo rank " << r << ": " << gloo.results[r].status;
      const auto g = nccl.coordinator->steps(r);
      const auto c = gloo.coordinator->steps(r);
      ASSERT_EQ(g.size(), c.size()) << strategy;
      ASSERT_GE(g.size(), 3u) << strategy;
      for (size_t s = 0; s < 3; ++s) {
        EXPECT_NEAR(g[s].local_grad_norm(), c[s].local_grad_norm(),
                    kFp32Rtol * c[s].local_grad_norm())
            << strategy << " rank " << r << " step " << s + 1;
        EXPECT_NEAR(g[s].synced_grad_norm(), c[s].synced_grad_norm(),
                    kFp32Rtol * c[s].synced_grad_norm())
            << strategy << " rank " << r << " step " << s + 1;
      }
    }
  }
}

// strategy zero1 on the GPU runner against ddp, both over NCCL through RunRank: the same
// reducer all-reduces the same gradients, each rank's sharded GpuSgdOptimizer runs the unsharded
// step's kernel on its owned elements, and the shard gathers copy bytes through device memory,
// so losses, gradient norms, parameters and the (gathered) momentum in the checkpoints match
// ddp's bit for bit (worker/rank/zero1_equivalence_test.cc is the CPU runner's counterpart).
constexpr uint64_t kCheckpointStep = 16;  // mid-run: the momentum gather, then the final one

struct Trained {
  JobRun run;
  std::string dir;
};

// The suite's NCCL job under `strategy`, with momentum, weight decay and dampening (every term
// of the update) and a mid-run checkpoint.
Trained TrainNccl(const std::string& strategy, int world, const std::string& precision = "") {
  Trained t;
  v1::JobSpec spec = SuiteSpec("nccl", world);
  spec.set_strategy(strategy);
  if (!precision.empty()) spec.set_mixed_precision(precision);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.mutable_optimizer()->set_weight_decay(0.0005);
  spec.mutable_optimizer()->set_dampening(0.1);
  spec.set_checkpoint_interval_steps(kCheckpointStep);
  t.dir = (std::filesystem::path(std::getenv("TEST_TMPDIR")) /
           ("equivalence-" + strategy + "-" + (precision.empty() ? "fp32" : precision)))
              .string();
  spec.set_checkpoint_dir(t.dir);
  t.run = RunJob(spec);
  return t;
}

TEST(GpuTrainingSuite, Zero1NcclJobMatchesDdpBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  const int world = GpuCount();
  auto train = [&](const std::string& strategy) { return TrainNccl(strategy, world); };
  const Trained ddp = train("ddp");
  const Trained zero1 = train("zero1");
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(ddp.run.results[r].status.ok()) << "ddp rank " << r << ": "
                                                << ddp.run.results[r].status;
    ASSERT_TRUE(zero1.run.results[r].status.ok()) << "zero1 rank " << r << ": "
                                                  << zero1.run.results[r].status;
    const auto a = ddp.run.coordinator->steps(r);
    const auto b = zero1.run.coordinator->steps(r);
    ASSERT_EQ(a.size(), 32u);
    ASSERT_EQ(b.size(), a.size());
    for (size_t s = 0; s < a.size(); ++s) {
      // Exact equality on purpose (see the comment above).
      ASSERT_EQ(b[s].loss(), a[s].loss()) << "rank " << r << " step " << s + 1;
      ASSERT_EQ(b[s].local_grad_norm(), a[s].local_grad_norm()) << "rank " << r << " step " << s;
      ASSERT_EQ(b[s].synced_grad_norm(), a[s].synced_grad_norm()) << "rank " << r << " step " << s;
      if (b[s].has_drift()) {
        EXPECT_EQ(b[s].drift(), 0.0) << "rank " << r << " step " << s + 1;
      }
    }
  }
  // Momentum held: all of it per rank under ddp, one shard per rank under zero1.
  const uint64_t total = ddp.run.results[0].outcome.momentum_elements;
  EXPECT_EQ(total, 16u * 32 + 32 + 32 * 4 + 4);
  uint64_t zero1_total = 0;
  for (int r = 0; r < world; ++r) {
    const uint64_t held = zero1.run.results[r].outcome.momentum_elements;
    EXPECT_LE(held, (total + world - 1) / world) << "rank " << r;
    zero1_total += held;
  }
  EXPECT_EQ(zero1_total, total) << "the shards cover every element once";
  // The final and the mid-run checkpoint: parameters and the whole momentum, bit for bit.
  const std::string periodic = "/suite-nccl/" + PeriodicCheckpointName(kCheckpointStep);
  const std::vector<std::pair<std::string, std::string>> files = {
      {ddp.run.coordinator->finishes(0)[0].checkpoint_path(),
       zero1.run.coordinator->finishes(0)[0].checkpoint_path()},
      {ddp.dir + periodic, zero1.dir + periodic}};
  for (const auto& [ddp_path, zero1_path] : files) {
    auto x = ReadCheckpoint(ddp_path);
    auto y = ReadCheckpoint(zero1_path);
    ASSERT_TRUE(x.ok()) << ddp_path << ": " << x.status();
    ASSERT_TRUE(y.ok()) << zero1_path << ": " << y.status();
    EXPECT_EQ(x->step, y->step);
    ASSERT_EQ(x->tensors.size(), y->tensors.size()) << zero1_path;
    for (size_t t = 0; t < x->tensors.size(); ++t) {
      const CheckpointTensor& c = x->tensors[t];
      const CheckpointTensor& g = y->tensors[t];
      ASSERT_EQ(g.name, c.name);
      ASSERT_EQ(g.data.size(), c.data.size()) << c.name;
      EXPECT_EQ(std::memcmp(g.data.data(), c.data.data(), c.data.size() * sizeof(float)), 0)
          << zero1_path << ": " << c.name << " differs from ddp's";
    }
    EXPECT_NE(y->FindTensor("fc1.weight.momentum_buffer"), nullptr) << zero1_path;
  }
}

// strategies zero2 and fsdp on the GPU runner against ddp over NCCL. zero2: backward writes into
// the zero2 reducer's device pool, each bucket is reduce-scattered into the rank's device
// shard, and the sharded GpuSgdOptimizer steps with it. fsdp: the same, with the parameters
// sharded in device memory too and each layer gathered before use. On one GPU the
// reduce-scatter and the gathers are copies, so the losses equal ddp's bit for bit; on several,
// NCCL's reduce-scatter may add a bucket's elements in another order than its all-reduce, so
// losses and checkpoints are compared within 1e-4 relative (fp32 rounding of a different
// summation order, as the CPU runner's 4-rank gloo comparison; worker/rank/zero2_equivalence_test.cc
// and fsdp_equivalence_test.cc are the CPU counterparts). Each rank holds one shard of the
// momentum and, with 2 or more ranks, less gradient memory than ddp's full arena (fsdp: less
// parameter memory too).
void ExpectShardedJobMatchesDdp(const std::string& strategy) {
  const int world = GpuCount();
  const Trained ddp = TrainNccl("ddp", world);
  const Trained sharded = TrainNccl(strategy, world);
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(ddp.run.results[r].status.ok()) << "ddp rank " << r << ": "
                                                << ddp.run.results[r].status;
    ASSERT_TRUE(sharded.run.results[r].status.ok()) << strategy << " rank " << r << ": "
                                                    << sharded.run.results[r].status;
    const auto a = ddp.run.coordinator->steps(r);
    const auto b = sharded.run.coordinator->steps(r);
    ASSERT_EQ(b.size(), a.size());
    for (size_t s = 0; s < a.size(); ++s) {
      if (world == 1) {
        ASSERT_EQ(b[s].loss(), a[s].loss()) << strategy << " step " << s + 1;
      } else {
        ASSERT_NEAR(b[s].loss(), a[s].loss(), 1e-4 * std::abs(a[s].loss()))
            << strategy << " rank " << r << " step " << s + 1;
      }
      EXPECT_NEAR(b[s].synced_grad_norm(), a[s].synced_grad_norm(),
                  1e-4 * a[s].synced_grad_norm())
          << strategy << " rank " << r << " step " << s + 1;
      if (b[s].has_drift()) EXPECT_EQ(b[s].drift(), 0.0) << "rank " << r << " step " << s + 1;
    }
    const v1::RankMemory& mine = sharded.run.results[r].outcome.memory;
    const v1::RankMemory& theirs = ddp.run.results[r].outcome.memory;
    if (world > 1) {
      EXPECT_LT(mine.gradient_bytes(), theirs.gradient_bytes())
          << strategy << " rank " << r << ": the pool and the shard, not a full arena";
    } else {
      // One rank's shard is the whole arena, so the pool comes on top of it: at most twice.
      EXPECT_LE(mine.gradient_bytes(), 2 * theirs.gradient_bytes()) << strategy;
    }
    if (strategy == "fsdp" && world > 1) {
      EXPECT_LT(mine.parameter_bytes(), theirs.parameter_bytes()) << "rank " << r;
    }
  }
  uint64_t total = 0;
  for (int r = 0; r < world; ++r) total += sharded.run.results[r].outcome.momentum_elements;
  EXPECT_EQ(total, ddp.run.results[0].outcome.momentum_elements)
      << "the shards cover every element once";
  // The final and the mid-run checkpoint (both consolidated: parameters and whole momentum).
  const std::string periodic = "/suite-nccl/" + PeriodicCheckpointName(kCheckpointStep);
  const std::vector<std::pair<std::string, std::string>> files = {
      {ddp.run.coordinator->finishes(0)[0].checkpoint_path(),
       sharded.run.coordinator->finishes(0)[0].checkpoint_path()},
      {ddp.dir + periodic, sharded.dir + periodic}};
  for (const auto& [ddp_path, path] : files) {
    auto x = ReadCheckpoint(ddp_path);
    auto y = ReadCheckpoint(path);
    ASSERT_TRUE(x.ok()) << ddp_path << ": " << x.status();
    ASSERT_TRUE(y.ok()) << path << ": " << y.status();
    ASSERT_EQ(x->tensors.size(), y->tensors.size()) << path;
    for (size_t t = 0; t < x->tensors.size(); ++t) {
      const CheckpointTensor& c = x->tensors[t];
      const CheckpointTensor& g = y->tensors[t];
      ASSERT_EQ(g.name, c.name);
      ASSERT_EQ(g.data.size(), c.data.size()) << c.name;
      for (size_t k = 0; k < c.data.size(); ++k) {
        ASSERT_NEAR(g.data[k], c.data[k], 1e-4 * (1 + std::abs(c.data[k])))
            << path << ": " << c.name << "[" << k << "]";
      }
    }
  }
}

TEST(GpuTrainingSuite, Zero2NcclJobMatchesDdp) {
  RL_SKIP_WITHOUT_GPU(1);
  ExpectShardedJobMatchesDdp("zero2");
}

TEST(GpuTrainingSuite, FsdpNcclJobMatchesDdp) {
  RL_SKIP_WITHOUT_GPU(1);
  ExpectShardedJobMatchesDdp("fsdp");
}

// bf16 mixed precision under fsdp: the fp32 master weights are the rank's parameter shard (what
// the optimizer steps), each gathered layer is cast to bf16 for its GEMMs. On one GPU it is
// ddp's bf16 run bit for bit (the same values cast by the same kernel); on several it trains
// as well (bf16 rounding amplifies the summation-order differences, so no element-wise bound).
TEST(GpuTrainingSuite, FsdpBf16KeepsFp32MasterWeightsInTheShard) {
  RL_SKIP_WITHOUT_GPU(1);
  const int world = GpuCount();
  const Trained ddp = TrainNccl("ddp", world, "bf16");
  const Trained fsdp = TrainNccl("fsdp", world, "bf16");
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(ddp.run.results[r].status.ok()) << ddp.run.results[r].status;
    ASSERT_TRUE(fsdp.run.results[r].status.ok()) << fsdp.run.results[r].status;
    const auto a = ddp.run.coordinator->steps(r);
    const auto b = fsdp.run.coordinator->steps(r);
    ASSERT_EQ(b.size(), a.size());
    if (world == 1) {
      for (size_t s = 0; s < a.size(); ++s) ASSERT_EQ(b[s].loss(), a[s].loss()) << s + 1;
    }
    EXPECT_LT(b.back().loss(), b.front().loss() * 0.8) << "rank " << r << " trains";
    EXPECT_NEAR(b.back().loss(), a.back().loss(), 0.05 * a.back().loss()) << "rank " << r;
  }
  const auto epochs = fsdp.run.coordinator->epochs(0);
  ASSERT_FALSE(epochs.empty());
  EXPECT_GT(epochs.back().test_accuracy(), 0.5);  // 4 classes: chance is 0.25
}

}  // namespace
}  // namespace ringleader
