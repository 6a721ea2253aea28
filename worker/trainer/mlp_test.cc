#include "worker/trainer/mlp.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Mean loss of `model` on a batch, without touching its gradients.
double LossOf(const Mlp& model, const Dataset& d) { return model.Evaluate(d, d.size).loss; }

std::vector<float> Copy(const float* p, size_t n) { return std::vector<float>(p, p + n); }

TEST(MlpTest, ParametersInRegistrationOrderWithTorchShapes) {
  Mlp model({784, 256, 128, 10}, 1);
  std::vector<std::string> names;
  for (const ParameterInfo& p : model.parameters()) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                 "fc3.weight", "fc3.bias"));
  EXPECT_THAT(model.parameters()[0].shape, ElementsAre(256, 784));
  EXPECT_EQ(model.parameters()[0].count, 256u * 784u);
  EXPECT_THAT(model.parameters()[5].shape, ElementsAre(10));
  EXPECT_EQ(model.parameter_count(), 784u * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
}

TEST(MlpTest, InitialisationUsesLinearBoundsAndIsDeterministic) {
  Mlp a({100, 16, 4}, 7);
  Mlp b({100, 16, 4}, 7);
  Mlp c({100, 16, 4}, 8);
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    const size_t n = a.parameters()[i].count;
    const double bound = 1.0 / std::sqrt(i < 2 ? 100.0 : 16.0);
    EXPECT_EQ(Copy(a.param(i), n), Copy(b.param(i), n)) << "same seed, parameter " << i;
    EXPECT_NE(Copy(a.param(i), n), Copy(c.param(i), n)) << "other seed, parameter " << i;
    double max_abs = 0.0;
    for (size_t k = 0; k < n; ++k) max_abs = std::max(max_abs, std::fabs(double{a.param(i)[k]}));
    EXPECT_LE(max_abs, bound) << "parameter " << i;
  }
  // The weights fill the interval (1600 draws: the largest is close to the bound).
  double max_abs = 0.0, sum = 0.0;
  for (size_t k = 0; k < a.parameters()[0].count; ++k) {
    max_abs = std::max(max_abs, std::fabs(double{a.param(0)[k]}));
    sum += a.param(0)[k];
  }
  EXPECT_GT(max_abs, 0.095);
  EXPECT_NEAR(sum / a.parameters()[0].count, 0.0, 0.01);
}

TEST(MlpTest, GradientsMatchFiniteDifferencesForEveryParameter) {
  const Dataset d = MakeSyntheticDataset(6, 5, 3, 11);
  Mlp model({5, 4, 4, 3}, 3);
  model.ZeroGradients();
  BackwardOptions opts;
  ASSERT_TRUE(model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  const double eps = 1e-3;
  size_t checked = 0;
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    for (size_t k = 0; k < model.parameters()[i].count; ++k) {
      float* w = model.param(i) + k;
      const float saved = *w;
      *w = saved + static_cast<float>(eps);
      const double plus = LossOf(model, d);
      *w = saved - static_cast<float>(eps);
      const double minus = LossOf(model, d);
      *w = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(model.grad(i)[k], numeric, 2e-3 + 1e-2 * std::fabs(numeric))
          << model.parameters()[i].name << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, model.parameter_count());
}

TEST(MlpTest, OnReadyRunsLastLayerFirstOncePerParameter) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 1);
  Mlp model({6, 5, 4, 3}, 1);
  std::vector<size_t> order;
  BackwardOptions opts;
  opts.on_ready = [&](size_t i) { order.push_back(i); };
  ASSERT_TRUE(model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  EXPECT_THAT(order, ElementsAre(5, 4, 3, 2, 1, 0));

  order.clear();
  opts.skip = {false, true, true, false, false, false};
  ASSERT_TRUE(model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  EXPECT_THAT(order, ElementsAre(5, 4, 3, 0));
}

TEST(MlpTest, OnReadySeesTheFinishedGradient) {
  // When on_ready(i) fires, parameter i's slot must already hold its final value.
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 2);
  Mlp model({6, 5, 3}, 1);
  model.ZeroGradients();
  std::vector<std::vector<float>> seen(model.parameters().size());
  BackwardOptions opts;
  opts.on_ready = [&](size_t i) { seen[i] = Copy(model.grad(i), model.parameters()[i].count); };
  ASSERT_TRUE(model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], Copy(model.grad(i), model.parameters()[i].count)) << "parameter " << i;
  }
}

TEST(MlpTest, TwoHalfBatchesWithHalfScaleEqualTheWholeBatch) {
  const Dataset d = MakeSyntheticDataset(16, 12, 4, 5);
  Mlp whole({12, 10, 8, 4}, 9);
  Mlp halves({12, 10, 8, 4}, 9);
  whole.ZeroGradients();
  halves.ZeroGradients();
  BackwardOptions full;
  ASSERT_TRUE(whole.ForwardBackward(d.x.data(), d.y.data(), 16, full).ok());
  BackwardOptions half;
  half.loss_scale = 0.5f;
  ASSERT_TRUE(halves.ForwardBackward(d.x.data(), d.y.data(), 8, half).ok());
  ASSERT_TRUE(halves.ForwardBackward(d.example(8), d.y.data() + 8, 8, half).ok());
  for (size_t i = 0; i < whole.parameters().size(); ++i) {
    for (size_t k = 0; k < whole.parameters()[i].count; ++k) {
      ASSERT_NEAR(whole.grad(i)[k], halves.grad(i)[k], 1e-5)
          << whole.parameters()[i].name << "[" << k << "]";
    }
  }
  // Accumulation really adds: a second whole-batch pass doubles the gradient.
  const std::vector<float> once = Copy(whole.grad(0), whole.parameters()[0].count);
  ASSERT_TRUE(whole.ForwardBackward(d.x.data(), d.y.data(), 16, full).ok());
  for (size_t k = 0; k < once.size(); ++k) ASSERT_NEAR(whole.grad(0)[k], 2 * once[k], 1e-6);
}

TEST(MlpTest, SkippedParametersKeepTheirGradient) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 3);
  Mlp model({6, 5, 3}, 2);
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    std::fill_n(model.grad(i), model.parameters()[i].count, 0.25f);
  }
  BackwardOptions opts;
  opts.skip = {true, false, false, true};
  ASSERT_TRUE(model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    const std::vector<float> g = Copy(model.grad(i), model.parameters()[i].count);
    const bool untouched = std::all_of(g.begin(), g.end(), [](float v) { return v == 0.25f; });
    EXPECT_EQ(untouched, opts.skip[i]) << model.parameters()[i].name;
  }
}

TEST(MlpTest, BoundGradientSlotsReceiveTheGradient) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 4);
  Mlp internal({6, 5, 3}, 2);
  Mlp bound({6, 5, 3}, 2);
  std::vector<float> flat(bound.parameter_count(), 0.0f);
  std::vector<float*> slots;
  size_t offset = 0;
  for (const ParameterInfo& p : bound.parameters()) {
    slots.push_back(flat.data() + offset);
    offset += p.count;
  }
  bound.BindGradients(slots);
  internal.ZeroGradients();
  BackwardOptions opts;
  ASSERT_TRUE(internal.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  ASSERT_TRUE(bound.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  offset = 0;
  for (size_t i = 0; i < internal.parameters().size(); ++i) {
    EXPECT_EQ(bound.grad(i), flat.data() + offset);
    const size_t n = internal.parameters()[i].count;
    EXPECT_EQ(Copy(internal.grad(i), n), Copy(flat.data() + offset, n));
    offset += n;
  }
  bound.BindGradients({});
  EXPECT_NE(bound.grad(0), flat.data());
  // The internal storage was released while bound, and comes back zeroed.
  for (size_t i = 0; i < bound.parameters().size(); ++i) {
    EXPECT_EQ(Copy(bound.grad(i), bound.parameters()[i].count),
              std::vector<float>(bound.parameters()[i].count, 0.0f));
  }
}

TEST(MlpTest, ReleasedGradientsComeFromSlotForAndMatchInternalOnes) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 4);
  Mlp internal({6, 5, 3}, 2);
  Mlp released({6, 5, 3}, 2);
  const size_t n = released.parameters().size();
  std::vector<bool> which(n, true);
  which[0] = false;  // fc1.weight keeps its own storage
  released.ReleaseOwnGradients(which);
  EXPECT_NE(released.grad(0), nullptr);
  for (size_t i = 1; i < n; ++i) EXPECT_EQ(released.grad(i), nullptr) << i;
  released.ZeroGradients();  // skips the null slots

  std::vector<std::vector<float>> pool(n);
  BackwardOptions opts;
  internal.ZeroGradients();
  ASSERT_TRUE(internal.ForwardBackward(d.x.data(), d.y.data(), d.size, opts).ok());
  BackwardOptions from_pool;
  from_pool.slot_for = [&](size_t i) {
    pool[i].assign(released.parameters()[i].count, 0.0f);
    return pool[i].data();
  };
  ASSERT_TRUE(released.ForwardBackward(d.x.data(), d.y.data(), d.size, from_pool).ok());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(released.grad(i), pool[i].data()) << i;
    const size_t count = released.parameters()[i].count;
    EXPECT_EQ(Copy(pool[i].data(), count), Copy(internal.grad(i), count)) << i;
  }
}

// strategy fsdp's seam: a model without parameters of its own takes every layer from
// params_for, in the documented order (forward 0..K-1, backward K-1..1), and computes exactly
// what the whole model does; a provider error stops the pass and comes back unchanged.
TEST(MlpTest, ReleasedParametersComeFromParamsForAndMatchOwnOnes) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 4);
  Mlp whole({6, 5, 4, 3}, 2);
  Mlp released({6, 5, 4, 3}, 2);
  std::vector<std::vector<float>> copies;
  for (size_t i = 0; i < released.parameters().size(); ++i) {
    copies.emplace_back(released.param(i), released.param(i) + released.parameters()[i].count);
  }
  released.ReleaseParameters();
  EXPECT_TRUE(released.parameters_released());
  for (size_t i = 0; i < copies.size(); ++i) EXPECT_EQ(released.param(i), nullptr) << i;

  std::vector<size_t> calls;
  BackwardOptions opts;
  opts.params_for = [&](size_t k) -> absl::StatusOr<LayerParameters> {
    calls.push_back(k);
    return LayerParameters{copies[2 * k].data(), copies[2 * k + 1].data()};
  };
  absl::StatusOr<double> a = whole.ForwardBackward(d.x.data(), d.y.data(), d.size, {});
  absl::StatusOr<double> b = released.ForwardBackward(d.x.data(), d.y.data(), d.size, opts);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_THAT(calls, ElementsAre(0, 1, 2, 2, 1));
  for (size_t i = 0; i < copies.size(); ++i) {
    const size_t count = whole.parameters()[i].count;
    EXPECT_EQ(Copy(released.grad(i), count), Copy(whole.grad(i), count)) << i;
  }
  calls.clear();
  absl::StatusOr<Mlp::EvalResult> evaluated = released.Evaluate(d, 3, opts.params_for);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->loss, whole.Evaluate(d, 3).loss);
  EXPECT_EQ(evaluated->accuracy, whole.Evaluate(d, 3).accuracy);
  EXPECT_THAT(calls, ElementsAre(0, 1, 2, 0, 1, 2, 0, 1, 2)) << "per chunk of 3 of 8 examples";
  calls.clear();
  ASSERT_TRUE(released.Evaluate(Slice(d, 0, 0), 3, opts.params_for).ok());
  EXPECT_THAT(calls, ElementsAre(0, 1, 2)) << "an empty share asks for every layer all the same";

  BackwardOptions failing;
  failing.params_for = [](size_t k) -> absl::StatusOr<LayerParameters> {
    return absl::UnavailableError(absl::StrCat("gather of layer ", k, " failed"));
  };
  absl::StatusOr<double> failed = released.ForwardBackward(d.x.data(), d.y.data(), d.size, failing);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "gather of layer 0 failed");

  released.AdoptParameters(copies);
  EXPECT_FALSE(released.parameters_released());
  EXPECT_EQ(released.Evaluate(d, 0).loss, whole.Evaluate(d, 0).loss);
}

TEST(MlpTest, BadInputIsRejectedAndChangesNothing) {
  const Dataset d = MakeSyntheticDataset(4, 6, 3, 4);
  Mlp model({6, 5, 3}, 2);
  model.ZeroGradients();
  std::vector<int32_t> labels = d.y;
  labels[2] = 3;
  BackwardOptions opts;
  absl::StatusOr<double> loss = model.ForwardBackward(d.x.data(), labels.data(), 4, opts);
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loss.status().message()), HasSubstr("example 2"));
  EXPECT_EQ(model.grad(0)[0], 0.0f);
  EXPECT_EQ(model.ForwardBackward(d.x.data(), d.y.data(), 0, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts.skip = {true};
  EXPECT_EQ(model.ForwardBackward(d.x.data(), d.y.data(), 4, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.CheckCompatible(MakeSyntheticDataset(4, 7, 3, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.CheckCompatible(MakeSyntheticDataset(4, 6, 5, 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MlpTest, ForwardBackwardLossEqualsEvaluateLoss) {
  const Dataset d = MakeSyntheticDataset(10, 6, 3, 6);
  Mlp model({6, 5, 3}, 2);
  BackwardOptions opts;
  opts.loss_scale = 0.25f;  // must not change the returned loss
  absl::StatusOr<double> loss = model.ForwardBackward(d.x.data(), d.y.data(), d.size, opts);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, model.Evaluate(d, 3).loss, 1e-6);  // chunking does not matter
  EXPECT_GT(*loss, 0.0);
  EXPECT_EQ(model.Evaluate(d, 3).examples, 10u);
}

TEST(MlpTest, BuffersAreExposedAndDoNotChangeTheLoss) {
  const Dataset d = MakeSyntheticDataset(8, 6, 3, 8);
  Mlp plain({6, 5, 3}, 4);
  Mlp buffered({6, 5, 3}, 4, MlpOptions{true});
  EXPECT_TRUE(plain.buffers().empty());
  std::vector<BufferInfo> buffers = buffered.buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].name, "fc1.input_mean");
  EXPECT_EQ(buffers[0].type, BufferType::kFloat32);
  EXPECT_EQ(buffers[0].count, 6u);
  EXPECT_EQ(buffers[1].name, "fc1.input_mask");
  EXPECT_EQ(buffers[1].type, BufferType::kBool);
  EXPECT_EQ(buffers[1].count, 6u);
  const bool* mask = static_cast<const bool*>(buffers[1].data);
  EXPECT_TRUE(std::all_of(mask, mask + 6, [](bool b) { return b; }));

  BackwardOptions opts;
  absl::StatusOr<double> a = plain.ForwardBackward(d.x.data(), d.y.data(), d.size, opts);
  absl::StatusOr<double> b = buffered.ForwardBackward(d.x.data(), d.y.data(), d.size, opts);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);

  // Running mean after one step from 0: 0.1 × batch mean.
  const float* mean = static_cast<const float*>(buffers[0].data);
  for (size_t j = 0; j < 6; ++j) {
    double batch_mean = 0.0;
    for (size_t i = 0; i < d.size; ++i) batch_mean += d.x[i * 6 + j];
    batch_mean /= d.size;
    EXPECT_NEAR(mean[j], 0.1 * batch_mean, 1e-6) << "feature " << j;
  }

  // The mask really gates the input: clearing it changes the loss.
  bool* writable_mask = static_cast<bool*>(buffers[1].data);
  std::fill(writable_mask, writable_mask + 6, false);
  EXPECT_NE(buffered.Evaluate(d, 8).loss, plain.Evaluate(d, 8).loss);
}

TEST(MlpTest, ModelsInConcurrentThreadsMatchASerialRun) {
  // Ranks may run as threads of one process: concurrent BLAS calls must not interfere.
  const Dataset d = MakeSyntheticDataset(64, 100, 10, 12);
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Mlp>> models;
  for (int t = 0; t < kThreads; ++t) models.push_back(std::make_unique<Mlp>(
      std::vector<size_t>{100, 64, 32, 10}, 5 + t));
  auto run = [&](int t) {
    models[t]->ZeroGradients();
    for (int step = 0; step < 20; ++step) {
      ASSERT_TRUE(models[t]->ForwardBackward(d.x.data(), d.y.data(), d.size, {}).ok());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run, t);
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    Mlp serial({100, 64, 32, 10}, 5 + t);
    serial.ZeroGradients();
    for (int step = 0; step < 20; ++step) {
      ASSERT_TRUE(serial.ForwardBackward(d.x.data(), d.y.data(), d.size, {}).ok());
    }
    for (size_t i = 0; i < serial.parameters().size(); ++i) {
      const size_t n = serial.parameters()[i].count;
      ASSERT_EQ(Copy(models[t]->grad(i), n), Copy(serial.grad(i), n))
          << "thread " << t << " " << serial.parameters()[i].name;
    }
  }
}

}  // namespace
}  // namespace ringleader
