// Host tests of the arithmetic the GPU kernels share with the CPU trainer (mlp_math.h), run
// against the CPU Mlp itself. Also calibrates the bf16 tolerance the GPU suite uses.
#include "worker/trainer/mlp_math.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/trainer/gpu_tolerances.h"
#include "worker/trainer/host_reference_mlp.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/norm.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {
namespace {

// A one-layer model whose logits are exactly its input: W = identity, b = 0 (a product with 1 or
// 0 and a sum with zeros are exact in any summation order, so OpenBLAS adds no rounding).
void MakeIdentityLayer(Mlp& m) {
  const size_t n = m.layers()[0];
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < n; ++c) m.param(0)[r * n + c] = r == c ? 1.0f : 0.0f;
    m.param(1)[r] = 0.0f;
  }
}

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (static_cast<float>(rng() % 20001) / 10000.0f - 1.0f);
  return v;
}

TEST(MlpMathTest, SoftmaxCrossEntropyAndBiasGradMatchCpuMlpBitForBit) {
  constexpr size_t kClasses = 7;
  constexpr size_t kBatch = 5;
  Mlp cpu({kClasses, kClasses}, /*seed=*/3);
  MakeIdentityLayer(cpu);
  const std::vector<float> logits = RandomVector(kBatch * kClasses, 11, 6.0f);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  for (float loss_scale : {1.0f, 0.25f}) {
    cpu.ZeroGradients();
    BackwardOptions opts;
    opts.loss_scale = loss_scale;
    auto cpu_loss = cpu.ForwardBackward(logits.data(), labels.data(), kBatch, opts);
    ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();

    const float scale = loss_scale / static_cast<float>(kBatch);
    std::vector<float> delta(kBatch * kClasses);
    double loss_sum = 0.0;
    for (size_t b = 0; b < kBatch; ++b) {
      loss_sum += SoftmaxCrossEntropyRow(logits.data() + b * kClasses, kClasses, labels[b], scale,
                                         delta.data() + b * kClasses);
    }
    EXPECT_EQ(loss_sum / kBatch, *cpu_loss) << "loss_scale " << loss_scale;
    for (size_t j = 0; j < kClasses; ++j) {
      // The CPU's bias gradient is exactly the column sum of its delta.
      EXPECT_EQ(BiasGradColumn(delta.data(), kBatch, kClasses, j, 0.0f), cpu.grad(1)[j])
          << "class " << j << ", loss_scale " << loss_scale;
    }
  }
}

TEST(MlpMathTest, SoftmaxCrossEntropyIsStableForLargeLogits) {
  const float logits[3] = {1000.0f, 0.0f, -1000.0f};
  float delta[3];
  const double loss = SoftmaxCrossEntropyRow(logits, 3, 1, 1.0f, delta);
  EXPECT_NEAR(loss, 1000.0, 1e-9);
  EXPECT_TRUE(std::isfinite(delta[0]) && std::isfinite(delta[1]) && std::isfinite(delta[2]));
  EXPECT_FLOAT_EQ(delta[0], 1.0f);  // softmax ~ (1, 0, 0), label 1
  EXPECT_FLOAT_EQ(delta[1], -1.0f);
}

TEST(MlpMathTest, BiasActivationAndReluBackwardFollowTheCpuRules) {
  EXPECT_EQ(BiasActivation(1.5f, -2.0f, /*relu=*/true), 0.0f);
  EXPECT_EQ(BiasActivation(1.5f, -2.0f, /*relu=*/false), -0.5f);
  EXPECT_EQ(BiasActivation(1.5f, 2.0f, /*relu=*/true), 3.5f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(BiasActivation(nan, 0.0f, /*relu=*/true), 0.0f);  // CPU: v > 0 ? v : 0
  EXPECT_EQ(ReluBackward(3.0f, 0.0f), 0.0f);
  EXPECT_EQ(ReluBackward(3.0f, 1e-30f), 3.0f);
  EXPECT_EQ(ReluBackward(3.0f, nan), 0.0f);  // CPU: !(act > 0) -> 0
}

// Runs `steps` SGD steps on a CPU Mlp and on a HostReferenceMlp from the same start and
// returns the largest |difference| seen (loss relative, parameters and gradients absolute).
struct Drift {
  double loss_rel = 0;
  double param_abs = 0;
  double grad_excess = 0;  // max(|g_ref - g_cpu| - (atol + rtol |g_cpu|)), fp32 bounds
  bool ready_order_equal = true;
};

Drift CompareWithCpu(bool bf16, int steps) {
  const std::vector<size_t> layers = {12, 16, 8, 4};
  const Dataset data = MakeSyntheticDataset(64, layers[0], static_cast<int>(layers.back()), 5);
  Mlp cpu(layers, /*seed=*/9);
  HostReferenceMlp ref(cpu, bf16);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  SgdOptimizer cpu_opt(cpu.parameters(), o);
  SgdOptimizer ref_opt(cpu.parameters(), o);
  constexpr size_t kBatch = 8;
  Drift drift;
  for (int step = 0; step < steps; ++step) {
    const size_t start = (step * kBatch) % data.size;
    std::vector<size_t> cpu_order;
    std::vector<size_t> ref_order;
    BackwardOptions opts;
    opts.on_ready = [&](size_t i) { cpu_order.push_back(i); };
    cpu.ZeroGradients();
    ref.ZeroGradients();
    const double cpu_loss = *cpu.ForwardBackward(data.example(start), &data.y[start], kBatch, opts);
    const double ref_loss =
        ref.ForwardBackward(data.example(start), &data.y[start], kBatch, 1.0f, &ref_order);
    drift.loss_rel = std::max(drift.loss_rel, std::abs(ref_loss - cpu_loss) / std::abs(cpu_loss));
    drift.ready_order_equal = drift.ready_order_equal && cpu_order == ref_order;
    std::vector<float*> cpu_params, ref_params;
    std::vector<const float*> cpu_grads, ref_grads;
    for (size_t i = 0; i < cpu.parameters().size(); ++i) {
      for (size_t k = 0; k < cpu.parameters()[i].count; ++k) {
        const double g = cpu.grad(i)[k];
        const double excess =
            std::abs(ref.grads()[i][k] - g) - (kFp32GradAtol + kFp32Rtol * std::abs(g));
        drift.grad_excess = std::max(drift.grad_excess, excess);
      }
      cpu_params.push_back(cpu.param(i));
      ref_params.push_back(ref.params()[i].data());
      cpu_grads.push_back(cpu.grad(i));
      ref_grads.push_back(ref.grads()[i].data());
    }
    const std::vector<bool> all(cpu.parameters().size(), true);
    cpu_opt.Step(cpu_params, cpu_grads, all);
    ref_opt.Step(ref_params, ref_grads, all);
    for (size_t i = 0; i < cpu.parameters().size(); ++i) {
      for (size_t k = 0; k < cpu.parameters()[i].count; ++k) {
        drift.param_abs =
            std::max(drift.param_abs, std::abs(static_cast<double>(ref.params()[i][k]) -
                                               static_cast<double>(cpu.param(i)[k])));
      }
    }
  }
  return drift;
}

TEST(MlpMathTest, HostReferenceOfTheGpuAlgorithmMatchesCpuMlpInFp32) {
  const Drift d = CompareWithCpu(/*bf16=*/false, /*steps=*/10);
  std::printf("fp32 host reference vs CPU Mlp over 10 steps: loss rel %.3g, param abs %.3g\n",
              d.loss_rel, d.param_abs);
  EXPECT_TRUE(d.ready_order_equal);
  EXPECT_LE(d.loss_rel, kFp32Rtol);
  EXPECT_LE(d.grad_excess, 0.0);
  EXPECT_LE(d.param_abs, kFp32ParamAtol);
}

TEST(MlpMathTest, Bf16ReferenceStaysWithinTheDocumentedBf16Tolerance) {
  const Drift d = CompareWithCpu(/*bf16=*/true, /*steps=*/10);
  std::printf("bf16 host reference vs fp32 CPU Mlp over 10 steps: loss rel %.3g, param abs %.3g\n",
              d.loss_rel, d.param_abs);
  EXPECT_TRUE(d.ready_order_equal);
  EXPECT_GT(d.param_abs, 0.0) << "bf16 rounding had no effect: the reference is not rounding";
  EXPECT_LE(d.loss_rel, kBf16LossRtol);
  EXPECT_LE(d.param_abs, kBf16ParamAtol);
}

// The GPU norm kernel's exact reduction shape (kSquaredSumBlocks blocks x 256 threads, grid
// stride, tree per block, partials added in order) against norm.h's sequential sum.
TEST(MlpMathTest, SquaredSumPartialsInTheKernelsShapeMatchL2Norm) {
  constexpr size_t kThreads = 256;
  const std::vector<float> v = RandomVector(100003, 17, 3.0f);
  const size_t stride = kSquaredSumBlocks * kThreads;
  double total = 0.0;
  for (int block = 0; block < kSquaredSumBlocks; ++block) {
    std::vector<double> sums(kThreads);
    for (size_t t = 0; t < kThreads; ++t) {
      sums[t] = SquaredSumStrided(v.data(), block * kThreads + t, v.size(), stride);
    }
    for (size_t width = kThreads / 2; width > 0; width /= 2) {
      for (size_t t = 0; t < width; ++t) sums[t] += sums[t + width];
    }
    total += sums[0];
  }
  const double expected = L2Norm(v.data(), v.size());
  EXPECT_NEAR(std::sqrt(total), expected, 1e-12 * expected);
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
