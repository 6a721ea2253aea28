// The GPU suite: the CUDA trainer against the CPU trainer, and NCCL across the GPUs present.
// Every test starts with RL_SKIP_WITHOUT_GPU, so on a machine without a GPU the whole suite
// skips with "no GPU: <reason>". Run on a GPU node:
//   bazel test //worker/gpu:gpu_suite_test --test_output=all
// Tolerances: tolerances.h (README.md explains them).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/bf16.h"
#include "worker/collective/collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/data/dataset.h"
#include "worker/gpu/gpu_mlp.h"
#include "worker/gpu/gpu_sgd.h"
#include "worker/gpu/gpu_test_util.h"
#include "worker/gpu/host_reference_mlp.h"
#include "worker/gpu/nccl_collective.h"
#include "worker/gpu/rank_threads.h"
#include "worker/gpu/tolerances.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/norm.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::HasSubstr;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define EXPECT_CUDA_OK(expr) EXPECT_EQ((expr), cudaSuccess) << #expr

SgdOptions TestSgd() {
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  return o;
}

// A device copy of a host vector, freed at scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T)); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  std::vector<T> ToHost() const {
    std::vector<T> out(n_);
    cudaDeviceSynchronize();
    cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  size_t n_;
  void* ptr_ = nullptr;
};

std::vector<float> ParamsOf(const Mlp& m, size_t i) {
  return std::vector<float>(m.param(i), m.param(i) + m.parameters()[i].count);
}

// Largest |a - b| over every parameter.
double MaxParamDiff(const Mlp& a, const Mlp& b) {
  double worst = 0;
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    for (size_t k = 0; k < a.parameters()[i].count; ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(a.param(i)[k]) - b.param(i)[k]));
    }
  }
  return worst;
}

double MaxParamDiff(const Mlp& a, HostReferenceMlp& b) {
  double worst = 0;
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    for (size_t k = 0; k < a.parameters()[i].count; ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(a.param(i)[k]) - b.params()[i][k]));
    }
  }
  return worst;
}

void CpuStep(Mlp& m, SgdOptimizer& opt) {
  std::vector<float*> p;
  std::vector<const float*> g;
  for (size_t i = 0; i < m.parameters().size(); ++i) {
    p.push_back(m.param(i));
    g.push_back(m.grad(i));
  }
  opt.Step(p, g, std::vector<bool>(p.size(), true));
}

TEST(GpuSuite, InitialParametersAreTheCpuModelsBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  Mlp cpu({20, 16, 5}, /*seed=*/4);
  auto gpu = GpuMlp::Create(cpu, {});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Mlp copy({20, 16, 5}, /*seed=*/99);  // different values until overwritten
  ASSERT_TRUE((*gpu)->CopyParametersTo(copy).ok());
  for (size_t i = 0; i < cpu.parameters().size(); ++i) {
    EXPECT_EQ(ParamsOf(copy, i), ParamsOf(cpu, i)) << cpu.parameters()[i].name;
  }
  EXPECT_EQ((*gpu)->parameters().size(), cpu.parameters().size());
  EXPECT_EQ((*gpu)->parameters()[2].name, "fc2.weight");
}

// fp32: every step's loss, every gradient and the parameters after every step within
// tolerances.h's fp32 bounds, and gradients ready in the CPU's order.
TEST(GpuSuite, Fp32TrainerTracksTheCpuTrainerStepByStep) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<size_t> layers = {64, 96, 48, 10};
  const Dataset data = MakeSyntheticDataset(320, layers[0], 10, 21);
  Mlp cpu(layers, /*seed=*/5);
  auto gpu_or = GpuMlp::Create(cpu, {});
  ASSERT_TRUE(gpu_or.ok()) << gpu_or.status();
  GpuMlp& gpu = **gpu_or;
  auto gpu_opt = GpuSgdOptimizer::Create(gpu.parameters(), TestSgd(), 0, gpu.stream());
  ASSERT_TRUE(gpu_opt.ok()) << gpu_opt.status();
  SgdOptimizer cpu_opt(cpu.parameters(), TestSgd());
  Mlp gpu_params(layers, 5);
  constexpr size_t kBatch = 32;
  for (int step = 0; step < 10; ++step) {
    const size_t start = step * kBatch % data.size;
    std::vector<size_t> cpu_order, gpu_order;
    BackwardOptions cpu_opts, gpu_opts;
    cpu_opts.on_ready = [&](size_t i) { cpu_order.push_back(i); };
    gpu_opts.on_ready = [&](size_t i) { gpu_order.push_back(i); };
    cpu.ZeroGradients();
    ASSERT_TRUE(gpu.ZeroGradients().ok());
    const double cpu_loss =
        *cpu.ForwardBackward(data.example(start), &data.y[start], kBatch, cpu_opts);
    auto gpu_loss = gpu.ForwardBackward(data.example(start), &data.y[start], kBatch, gpu_opts);
    ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
    EXPECT_LE(std::abs(*gpu_loss - cpu_loss), kFp32Rtol * std::abs(cpu_loss)) << "step " << step;
    EXPECT_EQ(gpu_order, cpu_order);
    std::vector<const float*> cpu_grads;
    for (size_t i = 0; i < cpu.parameters().size(); ++i) {
      auto g = gpu.CopyGradientToHost(i);
      ASSERT_TRUE(g.ok()) << g.status();
      for (size_t k = 0; k < g->size(); ++k) {
        const double c = cpu.grad(i)[k];
        ASSERT_LE(std::abs((*g)[k] - c), kFp32GradAtol + kFp32Rtol * std::abs(c))
            << "step " << step << " " << cpu.parameters()[i].name << "[" << k << "]";
      }
      cpu_grads.push_back(cpu.grad(i));
    }
    auto norm = gpu.GradNorm();
    ASSERT_TRUE(norm.ok()) << norm.status();
    std::vector<size_t> counts;
    for (const ParameterInfo& p : cpu.parameters()) counts.push_back(p.count);
    const double cpu_norm = L2Norm(cpu_grads, counts);
    EXPECT_LE(std::abs(*norm - cpu_norm), kFp32Rtol * cpu_norm);

    CpuStep(cpu, cpu_opt);
    ASSERT_TRUE((*gpu_opt)
                    ->Step(gpu.param_ptrs(), gpu.grad_ptrs(),
                           std::vector<bool>(cpu.parameters().size(), true))
                    .ok());
    ASSERT_TRUE(gpu.CopyParametersTo(gpu_params).ok());
    EXPECT_LE(MaxParamDiff(gpu_params, cpu), kFp32ParamAtol) << "after step " << step;
  }
}

// The SGD kernel runs sgd_math.h's update without FMA contraction: same inputs, same bits.
TEST(GpuSuite, GpuSgdMatchesCpuSgdBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  std::vector<ParameterInfo> infos = {{"a", {1000}, 1000}, {"b", {37}, 37}};
  std::mt19937_64 rng(8);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 997.0f;
    return v;
  };
  for (bool nesterov : {false, true}) {
    SgdOptions o = TestSgd();
    o.nesterov = nesterov;
    std::vector<std::vector<float>> cpu_params = {random(1000), random(37)};
    DeviceBuffer<float> pa(cpu_params[0]), pb(cpu_params[1]);
    cudaStream_t stream;
    ASSERT_CUDA_OK(cudaStreamCreate(&stream));
    auto gpu_opt = GpuSgdOptimizer::Create(infos, o, 0, stream);
    ASSERT_TRUE(gpu_opt.ok());
    SgdOptimizer cpu_opt(infos, o);
    for (int step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> grads = {random(1000), random(37)};
      DeviceBuffer<float> ga(grads[0]), gb(grads[1]);
      // Parameter b has no gradient at step 0: its momentum buffer starts at step 1.
      const std::vector<bool> has_grad = {true, step > 0};
      cpu_opt.Step({cpu_params[0].data(), cpu_params[1].data()}, {grads[0].data(), grads[1].data()},
                   has_grad);
      ASSERT_TRUE((*gpu_opt)->Step({pa.get(), pb.get()}, {ga.get(), gb.get()}, has_grad).ok());
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(pa.ToHost(), cpu_params[0]) << "nesterov " << nesterov << " step " << step;
      EXPECT_EQ(pb.ToHost(), cpu_params[1]) << "nesterov " << nesterov << " step " << step;
    }
    auto buffers = (*gpu_opt)->CopyMomentumBuffersToHost();
    ASSERT_TRUE(buffers.ok());
    EXPECT_EQ(*buffers, cpu_opt.momentum_buffers());
    gpu_opt->reset();
    cudaStreamDestroy(stream);
  }
}

// Accumulation, loss_scale and the skip list behave like the CPU Mlp's.
TEST(GpuSuite, AccumulationLossScaleAndSkipMatchTheCpuMlp) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<size_t> layers = {16, 12, 4};
  const Dataset data = MakeSyntheticDataset(32, 16, 4, 3);
  Mlp cpu(layers, 2);
  auto gpu = GpuMlp::Create(cpu, {});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  BackwardOptions opts;
  opts.loss_scale = 0.5f;
  opts.skip = {false, false, true, false};  // fc2.weight gets nothing
  std::vector<size_t> ready;
  opts.on_ready = [&](size_t i) { ready.push_back(i); };
  for (size_t micro = 0; micro < 2; ++micro) {
    ASSERT_TRUE(cpu.ForwardBackward(data.example(micro * 8), &data.y[micro * 8], 8, opts).ok());
    ASSERT_TRUE((*gpu)->ForwardBackward(data.example(micro * 8), &data.y[micro * 8], 8, opts).ok());
  }
  // fc2.bias, (fc2.weight skipped), fc1.bias, fc1.weight; CPU then GPU, per micro-batch.
  EXPECT_EQ(ready, (std::vector<size_t>{3, 1, 0, 3, 1, 0, 3, 1, 0, 3, 1, 0}));
  for (size_t i = 0; i < 4; ++i) {
    auto g = (*gpu)->CopyGradientToHost(i);
    ASSERT_TRUE(g.ok());
    for (size_t k = 0; k < g->size(); ++k) {
      const double c = cpu.grad(i)[k];
      EXPECT_LE(std::abs((*g)[k] - c), kFp32GradAtol + kFp32Rtol * std::abs(c)) << i << "," << k;
    }
  }
  auto skipped = (*gpu)->CopyGradientToHost(2);
  EXPECT_EQ(*skipped, std::vector<float>(skipped->size(), 0.0f));
  std::vector<int32_t> bad(8, 0);
  bad[5] = 4;
  EXPECT_EQ((*gpu)->ForwardBackward(data.example(0), bad.data(), 8, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuSuite, BoundGradientsAreWrittenIntoTheCallersMemory) {
  RL_SKIP_WITHOUT_GPU(1);
  const Dataset data = MakeSyntheticDataset(8, 10, 3, 6);
  Mlp cpu({10, 6, 3}, 7);
  auto gpu = GpuMlp::Create(cpu, {});
  ASSERT_TRUE(gpu.ok());
  ASSERT_TRUE((*gpu)->ForwardBackward(data.example(0), data.y.data(), 8, {}).ok());
  std::vector<std::vector<float>> own;
  for (size_t i = 0; i < 4; ++i) own.push_back(*(*gpu)->CopyGradientToHost(i));
  DeviceBuffer<float> flat((*gpu)->parameter_count());
  std::vector<float*> slots;
  size_t offset = 0;
  for (const ParameterInfo& p : (*gpu)->parameters()) {
    slots.push_back(flat.get() + offset);
    offset += p.count;
  }
  (*gpu)->BindGradients(slots);
  ASSERT_TRUE((*gpu)->ZeroGradients().ok());
  ASSERT_TRUE((*gpu)->ForwardBackward(data.example(0), data.y.data(), 8, {}).ok());
  const std::vector<float> bucket = flat.ToHost();
  offset = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(std::vector<float>(bucket.begin() + offset, bucket.begin() + offset + own[i].size()),
              own[i]);
    offset += own[i].size();
  }
}

// bf16 mixed precision: close to the host emulation of the same roundings, and within the
// documented distance of the fp32 CPU trainer (the model and steps the host test calibrated).
TEST(GpuSuite, Bf16TrainerTracksTheEmulationAndStaysNearFp32) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<size_t> layers = {12, 16, 8, 4};
  const Dataset data = MakeSyntheticDataset(64, layers[0], 4, 5);
  Mlp cpu(layers, /*seed=*/9);
  HostReferenceMlp emulation(cpu, /*bf16=*/true);
  GpuMlpOptions options;
  options.precision = Precision::kBf16;
  auto gpu = GpuMlp::Create(cpu, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto gpu_opt = GpuSgdOptimizer::Create((*gpu)->parameters(), TestSgd(), 0, (*gpu)->stream());
  ASSERT_TRUE(gpu_opt.ok());
  SgdOptimizer cpu_opt(cpu.parameters(), TestSgd());
  SgdOptimizer emu_opt(cpu.parameters(), TestSgd());
  Mlp gpu_params(layers, 9);
  constexpr size_t kBatch = 8;
  for (int step = 0; step < 10; ++step) {
    const size_t start = step * kBatch % data.size;
    cpu.ZeroGradients();
    emulation.ZeroGradients();
    ASSERT_TRUE((*gpu)->ZeroGradients().ok());
    const double cpu_loss = *cpu.ForwardBackward(data.example(start), &data.y[start], kBatch, {});
    const double emu_loss =
        emulation.ForwardBackward(data.example(start), &data.y[start], kBatch, 1.0f, nullptr);
    auto gpu_loss = (*gpu)->ForwardBackward(data.example(start), &data.y[start], kBatch, {});
    ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
    EXPECT_LE(std::abs(*gpu_loss - emu_loss), kBf16VsEmulationLossRtol * emu_loss) << step;
    EXPECT_LE(std::abs(*gpu_loss - cpu_loss), kBf16LossRtol * cpu_loss) << step;
    CpuStep(cpu, cpu_opt);
    std::vector<float*> ep;
    std::vector<const float*> eg;
    for (size_t i = 0; i < layers.size() * 2 - 2; ++i) {
      ep.push_back(emulation.params()[i].data());
      eg.push_back(emulation.grads()[i].data());
    }
    emu_opt.Step(ep, eg, std::vector<bool>(ep.size(), true));
    ASSERT_TRUE(
        (*gpu_opt)
            ->Step((*gpu)->param_ptrs(), (*gpu)->grad_ptrs(), std::vector<bool>(ep.size(), true))
            .ok());
    ASSERT_TRUE((*gpu)->CopyParametersTo(gpu_params).ok());
    EXPECT_LE(MaxParamDiff(gpu_params, emulation), kBf16VsEmulationParamAtol) << step;
    EXPECT_LE(MaxParamDiff(gpu_params, cpu), kBf16ParamAtol) << step;
  }
}

// --- NCCL across the GPUs present: one rank per GPU, ranks as threads. ---

struct RankResources {
  cudaStream_t compute = nullptr;
  std::unique_ptr<Collective> collective;
};

NcclOptions FastNcclOptions(cudaStream_t compute) {
  NcclOptions o;
  o.init_timeout = absl::Seconds(60);
  o.collective_timeout = absl::Seconds(30);
  o.compute_stream = compute;
  return o;
}

TEST(GpuSuite, NcclCollectivesAcrossAllGpus) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  auto store = std::make_shared<InMemoryKeyValueStore>();
  constexpr size_t kCount = 1000;
  std::vector<std::string> failures(n);
  RunRanks(
      n,
      [&](int r) {
        auto fail = [&](const std::string& what) {
          if (failures[r].empty()) failures[r] = what;
        };
        if (cudaSetDevice(r) != cudaSuccess) return fail("cudaSetDevice");
        cudaStream_t compute;
        cudaStreamCreate(&compute);
        auto c = CreateNcclCollective(store, "suite/all/", r, n, r, FastNcclOptions(compute));
        if (!c.ok()) return fail(c.status().ToString());
        Collective& coll = **c;
        // Fill through the compute stream and issue at once: the collective must wait for it.
        float* pinned;
        cudaMallocHost(&pinned, kCount * sizeof(float));
        std::fill(pinned, pinned + kCount, static_cast<float>(r + 1));
        DeviceBuffer<float> buf(kCount);
        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        absl::Status s =
            coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kSum)->Wait();
        if (!s.ok()) return fail(s.ToString());
        if (buf.ToHost() != std::vector<float>(kCount, n * (n + 1) / 2.0f)) fail("sum");

        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        s = coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kAvg)->Wait();
        if (!s.ok() || buf.ToHost() != std::vector<float>(kCount, (n + 1) / 2.0f)) fail("avg");

        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        s = coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kMax)->Wait();
        if (!s.ok() || buf.ToHost() != std::vector<float>(kCount, static_cast<float>(n)))
          fail("max");

        DeviceBuffer<uint16_t> bf(std::vector<uint16_t>(kCount, FloatToBf16(r + 1.0f)));
        s = coll.AllReduce({bf.get(), kCount, DataType::kBFloat16}, ReduceOp::kSum)->Wait();
        if (!s.ok() ||
            bf.ToHost() != std::vector<uint16_t>(kCount, FloatToBf16(n * (n + 1) / 2.0f))) {
          fail("bf16 sum");
        }
        DeviceBuffer<uint8_t> flags(std::vector<uint8_t>(8, r == n - 1 ? 1 : 0));
        s = coll.AllReduce({flags.get(), 8, DataType::kUInt8}, ReduceOp::kMax)->Wait();
        if (!s.ok() || flags.ToHost() != std::vector<uint8_t>(8, 1)) fail("uint8 max");

        DeviceBuffer<float> mine(std::vector<float>(4, static_cast<float>(r)));
        s = coll.Broadcast({mine.get(), 4, DataType::kFloat32}, n - 1)->Wait();
        if (!s.ok() || mine.ToHost() != std::vector<float>(4, n - 1.0f)) fail("broadcast");

        DeviceBuffer<float> in(std::vector<float>(4, static_cast<float>(r)));
        DeviceBuffer<float> gathered(4 * n);
        s = coll.AllGather({in.get(), 4, DataType::kFloat32},
                           {gathered.get(), 4u * n, DataType::kFloat32})
                ->Wait();
        std::vector<float> expected_gather;
        for (int q = 0; q < n; ++q)
          expected_gather.insert(expected_gather.end(), 4, static_cast<float>(q));
        if (!s.ok() || gathered.ToHost() != expected_gather) fail("all-gather");

        DeviceBuffer<float> scatter_in(std::vector<float>(4 * n, r + 1.0f));
        DeviceBuffer<float> scatter_out(4);
        s = coll.ReduceScatter({scatter_in.get(), 4u * n, DataType::kFloat32},
                               {scatter_out.get(), 4, DataType::kFloat32}, ReduceOp::kSum)
                ->Wait();
        if (!s.ok() || scatter_out.ToHost() != std::vector<float>(4, n * (n + 1) / 2.0f)) {
          fail("reduce-scatter");
        }
        s = coll.Barrier()->Wait();
        if (!s.ok()) fail("barrier: " + s.ToString());
        c->reset();
        cudaFreeHost(pinned);
        cudaStreamDestroy(compute);
      },
      absl::Seconds(240));
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << n;
}

// World size = GPUs + 1, and the extra rank never starts: every present rank's init times out
// (DEADLINE_EXCEEDED naming the missing rank) and aborts its communicator instead of hanging.
TEST(GpuSuite, ARankThatNeverJoinsMakesTheOthersTimeOutAndAbortCleanly) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  const int world = n + 1;
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::Status> results(n);
  RunRanks(
      n,
      [&](int r) {
        cudaSetDevice(r);
        NcclOptions o = FastNcclOptions(nullptr);
        o.init_timeout = absl::Seconds(5);
        results[r] = CreateNcclCollective(store, "suite/missing/", r, world, r, o).status();
      },
      absl::Seconds(120));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    EXPECT_THAT(std::string(results[r].message()),
                HasSubstr(absl::StrCat("never started communicator init: ", world - 1, ")")));
  }
}

// Two GPUs: rank 1 stays silent while rank 0 runs an all-reduce. Rank 0's Work passes its
// deadline -> DEADLINE_EXCEEDED and ncclCommAbort. Then rank 1 issues a broadcast that can never
// complete and aborts it, as the coordinator's abort would -> ABORTED with the reason.
TEST(GpuSuite, ASilentPeerMakesAWorkTimeOutAndAbortEndsThePeersWork) {
  RL_SKIP_WITHOUT_GPU(2);
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::Status> results(2);
  absl::Notification rank0_done;
  RunRanks(
      2,
      [&](int r) {
        cudaSetDevice(r);
        auto c = CreateNcclCollective(store, "suite/silent/", r, 2, r, FastNcclOptions(nullptr));
        if (!c.ok()) {
          results[r] = c.status();
          if (r == 0) rank0_done.Notify();
          return;
        }
        DeviceBuffer<float> buf(256);
        if (r == 0) {
          CollectiveOptions opts;
          opts.timeout = absl::Seconds(3);
          results[0] =
              (*c)->AllReduce({buf.get(), 256, DataType::kFloat32}, ReduceOp::kSum, opts)->Wait();
          rank0_done.Notify();
        } else {
          // Stay alive and silent until rank 0 has given up, so its failure is a pure timeout.
          if (!rank0_done.WaitForNotificationWithTimeout(absl::Seconds(60))) return;
          auto work = (*c)->Broadcast({buf.get(), 16, DataType::kFloat32}, 0);
          (*c)->Abort(absl::UnavailableError("coordinator: abort the attempt"));
          results[1] = work->Wait();
        }
      },
      absl::Seconds(120));
  EXPECT_EQ(results[0].code(), absl::StatusCode::kDeadlineExceeded) << results[0];
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("did not finish within 3s"));
  EXPECT_EQ(results[1].code(), absl::StatusCode::kAborted) << results[1];
  EXPECT_THAT(std::string(results[1].message()), HasSubstr("coordinator: abort the attempt"));
}

// Data-parallel training over NCCL on every GPU: each rank's gradient is all-reduced (kAvg) the
// moment it is ready during backward; after 3 steps every rank's parameters match the CPU
// trainer stepping on the average of the per-shard gradients.
TEST(GpuSuite, DataParallelStepsOverNcclMatchTheCpuAverage) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  const std::vector<size_t> layers = {32, 24, 6};
  constexpr size_t kBatch = 16;
  const Dataset data = MakeSyntheticDataset(kBatch * n * 3, layers[0], 6, 12);
  // CPU reference: per step, the gradients of every shard, averaged, then one SGD step.
  Mlp reference(layers, 31);
  SgdOptimizer ref_opt(reference.parameters(), TestSgd());
  std::vector<std::vector<float>> averaged(reference.parameters().size());
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < averaged.size(); ++i)
      averaged[i].assign(reference.parameters()[i].count, 0.0f);
    for (int r = 0; r < n; ++r) {
      reference.ZeroGradients();
      const size_t start = (step * n + r) * kBatch;
      ASSERT_TRUE(reference.ForwardBackward(data.example(start), &data.y[start], kBatch, {}).ok());
      for (size_t i = 0; i < averaged.size(); ++i) {
        for (size_t k = 0; k < averaged[i].size(); ++k) averaged[i][k] += reference.grad(i)[k] / n;
      }
    }
    std::vector<float*> p;
    std::vector<const float*> g;
    for (size_t i = 0; i < averaged.size(); ++i) {
      p.push_back(reference.param(i));
      g.push_back(averaged[i].data());
    }
    ref_opt.Step(p, g, std::vector<bool>(p.size(), true));
  }

  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::string> failures(n);
  std::vector<double> diffs(n, -1);
  RunRanks(
      n,
      [&](int r) {
        Mlp init(layers, 31);
        GpuMlpOptions mo;
        mo.device = r;
        auto model = GpuMlp::Create(init, mo);
        if (!model.ok()) {
          failures[r] = model.status().ToString();
          return;
        }
        auto c =
            CreateNcclCollective(store, "suite/ddp/", r, n, r, FastNcclOptions((*model)->stream()));
        if (!c.ok()) {
          failures[r] = c.status().ToString();
          return;
        }
        auto opt =
            GpuSgdOptimizer::Create((*model)->parameters(), TestSgd(), r, (*model)->stream());
        if (!opt.ok()) {
          failures[r] = opt.status().ToString();
          return;
        }
        for (int step = 0; step < 3 && failures[r].empty(); ++step) {
          std::vector<std::shared_ptr<Work>> works;
          BackwardOptions bo;
          bo.on_ready = [&](size_t i) {
            works.push_back((*c)->AllReduce(
                {(*model)->grad(i), (*model)->parameters()[i].count, DataType::kFloat32},
                ReduceOp::kAvg));
          };
          if (!(*model)->ZeroGradients().ok()) failures[r] = "zero";
          const size_t start = (step * n + r) * kBatch;
          auto loss = (*model)->ForwardBackward(data.example(start), &data.y[start], kBatch, bo);
          if (!loss.ok()) failures[r] = loss.status().ToString();
          for (auto& w : works) {
            absl::Status s = w->Wait();
            if (!s.ok()) failures[r] = s.ToString();
          }
          absl::Status s = (*opt)->Step((*model)->param_ptrs(), (*model)->grad_ptrs(),
                                        std::vector<bool>(layers.size() * 2 - 2, true));
          if (!s.ok()) failures[r] = s.ToString();
        }
        Mlp out(layers, 0);
        if ((*model)->CopyParametersTo(out).ok()) diffs[r] = MaxParamDiff(out, reference);
      },
      absl::Seconds(240));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(failures[r], "") << "rank " << r;
    EXPECT_GE(diffs[r], 0.0) << "rank " << r;
    EXPECT_LE(diffs[r], kFp32ParamAtol) << "rank " << r;
  }
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
