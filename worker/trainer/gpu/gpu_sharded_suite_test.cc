// The GPU trainer's pieces of strategies zero2 and fsdp, against the unsharded GPU trainer (needs
// a GPU; without one every test skips with "no GPU: <reason>", and fails under RL_REQUIRE_GPU=1):
//   * BackwardOptions::slot_for with the model's own gradients released: each gradient lands in
//     the slot handed out, once per parameter, in backward order, bit for bit the own ones;
//   * BackwardOptions::params_for with the model's parameters released: the provider is asked
//     for layers 0..K-1, then K-1..1 (the CPU Mlp's 2K - 1 calls), and loss and gradients equal
//     the model's own, bit for bit, in fp32 and bf16;
//   * GpuSgdOptimizer::StepOwned / StepShard equal Step on the owned elements, bit for bit.
// Device buffers are filled and zeroed on the stream that uses them (the model's non-blocking
// stream is not ordered after the legacy default stream).
// Run on a GPU node: bazel test --config=gpu //worker/trainer/gpu:gpu_sharded_suite_test
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/gpu/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/trainer/gpu/gpu_mlp.h"
#include "worker/trainer/gpu/gpu_sgd.h"
#include "worker/trainer/gpu/gpu_suite_util.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::vector<float>> Gradients(GpuMlp& model) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    absl::StatusOr<std::vector<float>> g = model.CopyGradientToHost(i);
    EXPECT_TRUE(g.ok()) << g.status();
    out.push_back(g.ok() ? *g : std::vector<float>());
  }
  return out;
}

TEST(GpuShardedSuite, SlotForGradientsLandInTheHandedOutSlotsBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  const Dataset data = MakeSyntheticDataset(16, 12, 4, 3);
  Mlp cpu({12, 10, 8, 4}, 5);
  auto own = GpuMlp::Create(cpu, {});
  auto pooled = GpuMlp::Create(cpu, {});
  ASSERT_TRUE(own.ok() && pooled.ok());
  ASSERT_TRUE((*own)->ForwardBackward(data.example(0), data.y.data(), 16, {}).ok());
  (*pooled)->ReleaseOwnGradients(std::vector<bool>(6, true));
  EXPECT_TRUE((*pooled)->ZeroGradients().ok()) << "released slots are skipped";
  // Zeroed on the model's (non-blocking) stream, which backward accumulates on.
  DeviceBuffer<float> pool((*pooled)->parameter_count(), (*pooled)->stream());
  ASSERT_CUDA_OK(pool.Zero());
  std::vector<size_t> offsets;
  size_t offset = 0;
  for (const ParameterInfo& p : (*pooled)->parameters()) {
    offsets.push_back(offset);
    offset += p.count;
  }
  std::vector<size_t> asked, ready;
  BackwardOptions opts;
  opts.slot_for = [&](size_t i) {
    asked.push_back(i);
    return pool.get() + offsets[i];
  };
  opts.on_ready = [&](size_t i) { ready.push_back(i); };
  ASSERT_TRUE((*pooled)->ForwardBackward(data.example(0), data.y.data(), 16, opts).ok());
  EXPECT_THAT(asked, ElementsAre(5, 4, 3, 2, 1, 0)) << "once each, bias before weight";
  EXPECT_EQ(ready, asked);
  const std::vector<float> flat = pool.ToHost();
  const std::vector<std::vector<float>> want = Gradients(**own);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::vector<float>(flat.begin() + offsets[i], flat.begin() + offsets[i] + want[i].size()),
              want[i])
        << "parameter " << i;
    EXPECT_EQ((*pooled)->grad(i), pool.get() + offsets[i]) << "grad(i) is the slot handed out";
  }
}

TEST(GpuShardedSuite, ProvidedParametersAfterReleaseMatchTheOwnOnesBitForBit) {
  RL_SKIP_WITHOUT_GPU(1);
  const Dataset data = MakeSyntheticDataset(16, 12, 4, 9);
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const std::string what = precision == Precision::kBf16 ? "bf16" : "fp32";
    Mlp cpu({12, 10, 8, 4}, 6);
    GpuMlpOptions options;
    options.precision = precision;
    auto own = GpuMlp::Create(cpu, options);
    auto sharded = GpuMlp::Create(cpu, options);
    ASSERT_TRUE(own.ok() && sharded.ok());
    // The provider's copies: each layer's weight and bias in device memory of their own.
    std::vector<std::unique_ptr<DeviceBuffer<float>>> copies;
    for (size_t i = 0; i < cpu.parameters().size(); ++i) {
      copies.push_back(std::make_unique<DeviceBuffer<float>>(
          std::vector<float>(cpu.param(i), cpu.param(i) + cpu.parameters()[i].count),
          (*sharded)->stream()));
    }
    (*sharded)->ReleaseParameters();
    EXPECT_TRUE((*sharded)->parameters_released());
    EXPECT_EQ((*sharded)->param(0), nullptr);
    Mlp host({12, 10, 8, 4}, 1);
    EXPECT_EQ((*sharded)->CopyParametersTo(host).code(), absl::StatusCode::kFailedPrecondition);

    std::vector<size_t> layers_asked;
    BackwardOptions opts;
    opts.params_for = [&](size_t k) -> absl::StatusOr<LayerParameters> {
      layers_asked.push_back(k);
      return LayerParameters{copies[2 * k]->get(), copies[2 * k + 1]->get()};
    };
    for (int pass = 0; pass < 2; ++pass) {  // accumulation over two micro-batches
      auto a = (*own)->ForwardBackward(data.example(pass * 8), &data.y[pass * 8], 8, {});
      auto b = (*sharded)->ForwardBackward(data.example(pass * 8), &data.y[pass * 8], 8, opts);
      ASSERT_TRUE(a.ok() && b.ok()) << what;
      EXPECT_EQ(*a, *b) << what << " pass " << pass;
    }
    EXPECT_THAT(layers_asked, ElementsAre(0, 1, 2, 2, 1, 0, 1, 2, 2, 1)) << what;
    EXPECT_EQ(Gradients(**own), Gradients(**sharded)) << what;

    opts.params_for = [](size_t k) -> absl::StatusOr<LayerParameters> {
      return absl::UnavailableError("gather failed");
    };
    auto failed = (*sharded)->ForwardBackward(data.example(0), data.y.data(), 8, opts);
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << what;
    EXPECT_THAT(std::string(failed.status().message()), HasSubstr("gather failed"));
  }
}

TEST(GpuShardedSuite, StepOwnedAndStepShardEqualStepOnTheOwnedElements) {
  RL_SKIP_WITHOUT_GPU(1);
  const std::vector<ParameterInfo> infos = {{"a", {300}, 300}, {"b", {20}, 20}};
  const std::vector<ElementRange> owned = {{100, 250}, {0, 0}};
  std::vector<float> a(300), b(20), ga(300), gb(20);
  for (size_t k = 0; k < a.size(); ++k) a[k] = 0.01f * static_cast<float>(k % 17) - 0.05f;
  for (size_t k = 0; k < b.size(); ++k) b[k] = 0.02f * static_cast<float>(k);
  cudaStream_t stream;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  {
    auto whole = GpuSgdOptimizer::CreateSharded(infos, TestSgd(), owned, 0, stream);
    auto by_shard = GpuSgdOptimizer::CreateSharded(infos, TestSgd(), owned, 0, stream);
    auto by_param = GpuSgdOptimizer::CreateSharded(infos, TestSgd(), owned, 0, stream);
    ASSERT_TRUE(whole.ok() && by_shard.ok() && by_param.ok());
    DeviceBuffer<float> pa(a, stream), pb(b, stream), qa(a, stream), qb(b, stream);
    DeviceBuffer<float> shard_a(std::vector<float>(a.begin() + 100, a.begin() + 250), stream);
    for (int step = 0; step < 3; ++step) {
      for (size_t k = 0; k < ga.size(); ++k) ga[k] = 0.001f * static_cast<float>((k * 7 + step) % 23);
      DeviceBuffer<float> dga(ga, stream), dgb(gb, stream);
      DeviceBuffer<float> owned_grad(std::vector<float>(ga.begin() + 100, ga.begin() + 250),
                                     stream);
      const std::vector<bool> has_grad = {true, true};
      ASSERT_TRUE((*whole)->Step({pa.get(), pb.get()}, {dga.get(), dgb.get()}, has_grad).ok());
      ASSERT_TRUE(
          (*by_param)->StepOwned({qa.get(), qb.get()}, {owned_grad.get(), nullptr}, has_grad).ok());
      ASSERT_TRUE(
          (*by_shard)->StepShard({shard_a.get(), nullptr}, {owned_grad.get(), nullptr}, has_grad)
              .ok());
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    }
    const std::vector<float> want = pa.ToHost();
    EXPECT_EQ(qa.ToHost(), want);
    EXPECT_EQ(shard_a.ToHost(), std::vector<float>(want.begin() + 100, want.begin() + 250));
    EXPECT_EQ(qb.ToHost(), b) << "nothing of b is owned";
    auto unsharded = GpuSgdOptimizer::Create(infos, TestSgd(), 0, stream);
    ASSERT_TRUE(unsharded.ok());
    EXPECT_EQ((*unsharded)->StepOwned({qa.get(), qb.get()}, {nullptr, nullptr}, {true, true}).code(),
              absl::StatusCode::kInvalidArgument);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
