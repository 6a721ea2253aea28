// The GPU trainer suite: the CUDA trainer against the CPU trainer. Every test starts with
// RL_SKIP_WITHOUT_GPU, so on a machine without a GPU the whole suite skips with "no GPU: <reason>"
// (and fails under RL_REQUIRE_GPU=1). Run on a GPU node:
//   bazel test --config=gpu //worker/trainer/gpu:gpu_trainer_suite_test
// Tolerances: worker/trainer/gpu_tolerances.h (docs/gpu.md explains them).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/gpu/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/trainer/gpu/gpu_mlp.h"
#include "worker/trainer/gpu/gpu_sgd.h"
#include "worker/trainer/gpu/gpu_suite_util.h"
#include "worker/trainer/gpu_tolerances.h"
#include "worker/trainer/host_reference_mlp.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/norm.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::HasSubstr;

std::vector<float> ParamsOf(const Mlp& m, size_t i) {
  return std::vector<float>(m.param(i), m.param(i) + m.parameters()[i].count);
}

// gpu_suite_util.h has the Mlp-against-Mlp form.
using ::ringleader::gpu::MaxParamDiff;

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
// gpu_tolerances.h's fp32 bounds, and gradients ready in the CPU's order.
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

// strategy zero1's optimizer on the GPU: shards that together cover every element, stepped on the
// same tensors, leave them bit for bit where the unsharded GPU optimizer does (the same kernel on
// sub-ranges), each with momentum for its owned elements only, equal to the CPU's sharded
// optimizer's; a whole (checkpoint) buffer restored into a shard is cut to it.
TEST(GpuSuite, ShardedGpuSgdMatchesTheUnshardedStepBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<ParameterInfo> infos = {{"a", {1000}, 1000}, {"b", {37}, 37}};
  // Three shards of the 1037 elements, one spanning both parameters, one without a's.
  const std::vector<std::vector<ElementRange>> owned = {
      {{0, 400}, {0, 0}}, {{400, 1000}, {0, 10}}, {{1000, 1000}, {10, 37}}};
  std::mt19937_64 rng(11);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 997.0f;
    return v;
  };
  for (bool nesterov : {false, true}) {
    SgdOptions o = TestSgd();
    o.nesterov = nesterov;
    if (!nesterov) o.dampening = 0.1;
    const std::vector<std::vector<float>> initial = {random(1000), random(37)};
    DeviceBuffer<float> pa(initial[0]), pb(initial[1]);  // the unsharded optimizer's
    DeviceBuffer<float> sa(initial[0]), sb(initial[1]);  // every shard's, together
    cudaStream_t stream;
    ASSERT_CUDA_OK(cudaStreamCreate(&stream));
    auto whole = GpuSgdOptimizer::Create(infos, o, 0, stream);
    ASSERT_TRUE(whole.ok()) << whole.status();
    std::vector<std::unique_ptr<GpuSgdOptimizer>> shards;
    std::vector<SgdOptimizer> cpu_shards;
    for (const std::vector<ElementRange>& mine : owned) {
      auto shard = GpuSgdOptimizer::CreateSharded(infos, o, mine, 0, stream);
      ASSERT_TRUE(shard.ok()) << shard.status();
      EXPECT_TRUE((*shard)->sharded());
      shards.push_back(*std::move(shard));
      cpu_shards.emplace_back(infos, o, mine);
    }
    std::vector<std::vector<float>> cpu_params = initial;
    for (int step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> grads = {random(1000), random(37)};
      DeviceBuffer<float> ga(grads[0]), gb(grads[1]);
      const std::vector<bool> has_grad = {true, step > 0};  // b's momentum starts at step 1
      ASSERT_TRUE((*whole)->Step({pa.get(), pb.get()}, {ga.get(), gb.get()}, has_grad).ok());
      for (auto& shard : shards) {
        ASSERT_TRUE(shard->Step({sa.get(), sb.get()}, {ga.get(), gb.get()}, has_grad).ok());
      }
      for (SgdOptimizer& shard : cpu_shards) {
        shard.Step({cpu_params[0].data(), cpu_params[1].data()},
                   {grads[0].data(), grads[1].data()}, has_grad);
      }
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(sa.ToHost(), pa.ToHost()) << "nesterov " << nesterov << " step " << step;
      EXPECT_EQ(sb.ToHost(), pb.ToHost()) << "nesterov " << nesterov << " step " << step;
      EXPECT_EQ(sa.ToHost(), cpu_params[0]) << "nesterov " << nesterov << " step " << step;
      EXPECT_EQ(sb.ToHost(), cpu_params[1]) << "nesterov " << nesterov << " step " << step;
    }
    auto reference = (*whole)->CopyMomentumBuffersToHost();
    ASSERT_TRUE(reference.ok()) << reference.status();
    size_t held = 0;
    for (size_t r = 0; r < shards.size(); ++r) {
      auto mine = shards[r]->CopyMomentumBuffersToHost();
      ASSERT_TRUE(mine.ok()) << mine.status();
      EXPECT_EQ(*mine, cpu_shards[r].momentum_buffers()) << "shard " << r;
      for (size_t i = 0; i < infos.size(); ++i) {
        const ElementRange& range = owned[r][i];
        const std::vector<float> slice((*reference)[i].begin() + range.begin,
                                       (*reference)[i].begin() + range.end);
        EXPECT_EQ((*mine)[i], slice) << "shard " << r << " parameter " << i;
      }
      EXPECT_EQ(shards[r]->momentum_elements(), cpu_shards[r].momentum_elements());
      EXPECT_EQ(shards[r]->step_count(), 3u);
      held += shards[r]->momentum_elements();
    }
    EXPECT_EQ(held, 1037u) << "the shards hold every element's momentum once";
    EXPECT_EQ((*whole)->momentum_elements(), 1037u);

    // Resume: the whole buffers into a fresh shard keep its elements; its own form too.
    auto resumed = GpuSgdOptimizer::CreateSharded(infos, o, owned[1], 0, stream);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ASSERT_TRUE((*resumed)->RestoreMomentumBuffers(*reference, 3).ok());
    auto cut = (*resumed)->CopyMomentumBuffersToHost();
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(*cut, cpu_shards[1].momentum_buffers());
    EXPECT_EQ((*resumed)->step_count(), 3u);
    ASSERT_TRUE((*resumed)->RestoreMomentumBuffers(cpu_shards[1].momentum_buffers(), 3).ok());
    EXPECT_EQ(*(*resumed)->CopyMomentumBuffersToHost(), cpu_shards[1].momentum_buffers());
    const absl::Status wrong = (*resumed)->RestoreMomentumBuffers({std::vector<float>(5), {}}, 3);
    EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(wrong.message()),
                HasSubstr("momentum buffer of a: got 5 elements, the parameter has 1000 and this "
                          "rank's shard of it 600"));
    EXPECT_EQ(*(*resumed)->CopyMomentumBuffersToHost(), cpu_shards[1].momentum_buffers())
        << "a refused restore changes nothing";
    const auto bad = GpuSgdOptimizer::CreateSharded(infos, o, {{0, 1001}, {0, 0}}, 0, stream);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    whole->reset();
    shards.clear();
    resumed->reset();
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
    (*gpu)->MarkParametersChanged();
    ASSERT_TRUE((*gpu)->CopyParametersTo(gpu_params).ok());
    EXPECT_LE(MaxParamDiff(gpu_params, emulation), kBf16VsEmulationParamAtol) << step;
    EXPECT_LE(MaxParamDiff(gpu_params, cpu), kBf16ParamAtol) << step;
  }
}

// bf16: the model casts its bf16 copy of the weights once per change of the fp32 parameters
// (MarkParametersChanged), not per micro-batch. Against a model told before EVERY pass (the
// cast per micro-batch it replaces): losses, gradients and parameters bit for bit over steps of
// two accumulated micro-batches. And the copy is really kept: weights overwritten without the
// mark leave the loss as it was; with it, the loss is a fresh model's on the new values.
TEST(GpuSuite, Bf16CopyIsRecastOnlyAfterTheParametersChanged) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<size_t> layers = {12, 16, 8, 4};
  const size_t num_params = layers.size() * 2 - 2;
  const Dataset data = MakeSyntheticDataset(64, layers[0], 4, 21);
  Mlp cpu(layers, /*seed=*/13);
  GpuMlpOptions options;
  options.precision = Precision::kBf16;
  auto marked = GpuMlp::Create(cpu, options);  // marked after each optimizer step
  auto always = GpuMlp::Create(cpu, options);  // marked before every pass
  ASSERT_TRUE(marked.ok() && always.ok());
  auto marked_opt =
      GpuSgdOptimizer::Create((*marked)->parameters(), TestSgd(), 0, (*marked)->stream());
  auto always_opt =
      GpuSgdOptimizer::Create((*always)->parameters(), TestSgd(), 0, (*always)->stream());
  ASSERT_TRUE(marked_opt.ok() && always_opt.ok());
  const std::vector<bool> all(num_params, true);
  constexpr size_t kMicro = 8;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE((*marked)->ZeroGradients().ok());
    ASSERT_TRUE((*always)->ZeroGradients().ok());
    for (int k = 0; k < 2; ++k) {
      const size_t start = (step * 2 + k) * kMicro % data.size;
      (*always)->MarkParametersChanged();
      auto a = (*marked)->ForwardBackward(data.example(start), &data.y[start], kMicro, {});
      auto b = (*always)->ForwardBackward(data.example(start), &data.y[start], kMicro, {});
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(*a, *b) << "step " << step << " micro-batch " << k;
    }
    for (size_t i = 0; i < num_params; ++i) {
      EXPECT_EQ(*(*marked)->CopyGradientToHost(i), *(*always)->CopyGradientToHost(i))
          << "step " << step << " gradient " << i;
    }
    ASSERT_TRUE((*marked_opt)->Step((*marked)->param_ptrs(), (*marked)->grad_ptrs(), all).ok());
    (*marked)->MarkParametersChanged();
    ASSERT_TRUE((*always_opt)->Step((*always)->param_ptrs(), (*always)->grad_ptrs(), all).ok());
  }
  Mlp marked_params(layers, 1), always_params(layers, 1);
  ASSERT_TRUE((*marked)->CopyParametersTo(marked_params).ok());
  ASSERT_TRUE((*always)->CopyParametersTo(always_params).ok());
  for (size_t i = 0; i < num_params; ++i) {
    EXPECT_EQ(ParamsOf(marked_params, i), ParamsOf(always_params, i)) << "parameter " << i;
  }

  // Overwrite the weights (the biases stay: they are read in fp32) without the mark.
  auto loss_now = [&](GpuMlp& m) {
    absl::StatusOr<double> loss = m.ForwardBackward(data.example(0), data.y.data(), kMicro, {});
    EXPECT_TRUE(loss.ok()) << loss.status();
    return loss.ok() ? *loss : -1.0;
  };
  const double kept = loss_now(**marked);
  Mlp other(layers, /*seed=*/99);
  for (size_t i = 0; i < num_params; i += 2) {
    ASSERT_CUDA_OK(cudaMemcpyAsync((*marked)->param(i), other.param(i),
                                   other.parameters()[i].count * sizeof(float),
                                   cudaMemcpyHostToDevice, (*marked)->stream()));
  }
  ASSERT_TRUE((*marked)->Synchronize().ok());
  EXPECT_EQ(loss_now(**marked), kept) << "recast without MarkParametersChanged";
  (*marked)->MarkParametersChanged();
  Mlp now(layers, 1);
  ASSERT_TRUE((*marked)->CopyParametersTo(now).ok());
  auto fresh = GpuMlp::Create(now, options);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const double recast = loss_now(**marked);
  EXPECT_NE(recast, kept);
  EXPECT_EQ(recast, loss_now(**fresh)) << "the recast copy is the new weights'";
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
