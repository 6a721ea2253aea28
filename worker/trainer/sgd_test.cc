#include "worker/trainer/sgd.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/norm.h"
#include "worker/trainer/sgd_math.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

// Reference trajectories worked out by hand from torch.optim.SGD's update rule (see
// sgd_math.h). Every value is a dyadic fraction, exact in float32, so the comparison is exact.
// Parameter starts at 1.0; gradients 1.0, 0.5, -1.0 in steps 1..3; lr 0.5, momentum 0.5,
// weight_decay 0.25.
//
// dampening 0.5:
//   1: d_p = 1 + .25·1 = 1.25;           buf = 1.25 (first step: no dampening)
//      p = 1 - .5·1.25 = 0.375
//   2: d_p = .5 + .25·.375 = 0.59375;    buf = .5·1.25 + .5·.59375 = 0.921875
//      p = .375 - .5·.921875 = -0.0859375
//   3: d_p = -1 + .25·(-.0859375) = -1.021484375
//      buf = .5·.921875 + .5·(-1.021484375) = -0.0498046875
//      p = -.0859375 + .5·.0498046875 = -0.06103515625
// nesterov (dampening 0):
//   1: d_p = 1.25; buf = 1.25; d_p = 1.25 + .5·1.25 = 1.875;        p = 0.0625
//   2: d_p = .5 + .25·.0625 = .515625; buf = .625 + .515625 = 1.140625
//      d_p = .515625 + .5·1.140625 = 1.0859375;                     p = -0.48046875
//   3: d_p = -1 + .25·(-.48046875) = -1.1201171875
//      buf = .5703125 - 1.1201171875 = -0.5498046875
//      d_p = -1.1201171875 - .27490234375 = -1.39501953125;         p = 0.217041015625
const float kGrads[3] = {1.0f, 0.5f, -1.0f};

std::vector<ParameterInfo> OneScalar() { return {{"w", {1}, 1}}; }

std::vector<float> Run3Steps(const SgdOptions& o, std::vector<float>* buffers_after_each) {
  SgdOptimizer opt(OneScalar(), o);
  float p = 1.0f;
  std::vector<float> trajectory;
  for (float g : kGrads) {
    opt.Step({&p}, {&g}, {true});
    trajectory.push_back(p);
    buffers_after_each->push_back(opt.momentum_buffers()[0].at(0));
  }
  EXPECT_EQ(opt.step_count(), 3u);
  return trajectory;
}

TEST(SgdTest, MomentumDampeningWeightDecayMatchTorchReference) {
  SgdOptions o;
  o.lr = 0.5;
  o.momentum = 0.5;
  o.dampening = 0.5;
  o.weight_decay = 0.25;
  std::vector<float> bufs;
  EXPECT_EQ(Run3Steps(o, &bufs), (std::vector<float>{0.375f, -0.0859375f, -0.06103515625f}));
  EXPECT_EQ(bufs, (std::vector<float>{1.25f, 0.921875f, -0.0498046875f}));
}

TEST(SgdTest, NesterovMatchesTorchReference) {
  SgdOptions o;
  o.lr = 0.5;
  o.momentum = 0.5;
  o.weight_decay = 0.25;
  o.nesterov = true;
  std::vector<float> bufs;
  EXPECT_EQ(Run3Steps(o, &bufs), (std::vector<float>{0.0625f, -0.48046875f, 0.217041015625f}));
  EXPECT_EQ(bufs, (std::vector<float>{1.25f, 1.140625f, -0.5498046875f}));
}

TEST(SgdTest, PlainSgdHasNoMomentumBuffers) {
  SgdOptions o;
  o.lr = 0.5;
  o.weight_decay = 0.25;
  SgdOptimizer opt(OneScalar(), o);
  float p = 1.0f;
  const float g = 1.0f;
  opt.Step({&p}, {&g}, {true});
  EXPECT_EQ(p, 1.0f - 0.5f * 1.25f);
  EXPECT_TRUE(opt.momentum_buffers()[0].empty());
  EXPECT_EQ(opt.momentum_buffer("w"), nullptr);
}

TEST(SgdTest, ParametersWithoutGradientAreSkippedAndStartMomentumLater) {
  SgdOptions o;
  o.lr = 0.5;
  o.momentum = 0.5;
  o.dampening = 0.5;
  o.weight_decay = 0.25;
  SgdOptimizer opt({{"a", {1}, 1}, {"b", {1}, 1}}, o);
  float a = 1.0f, b = 1.0f;
  const float ga = 1.0f, gb = 1.0f;
  opt.Step({&a, &b}, {&ga, &gb}, {true, false});
  EXPECT_EQ(a, 0.375f);
  EXPECT_EQ(b, 1.0f);  // untouched, no buffer
  EXPECT_TRUE(opt.momentum_buffers()[1].empty());
  // b's first step with a gradient initialises its buffer (no dampening), like torch.
  opt.Step({&a, &b}, {&ga, &gb}, {false, true});
  EXPECT_EQ(a, 0.375f);
  EXPECT_EQ(b, 0.375f);
  ASSERT_NE(opt.momentum_buffer("b"), nullptr);
  EXPECT_EQ(opt.momentum_buffer("b")->at(0), 1.25f);
  EXPECT_EQ(opt.momentum_buffer("a")->at(0), 1.25f);
}

TEST(SgdTest, RestoredStateContinuesTheSameTrajectory) {
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-3;
  const std::vector<ParameterInfo> infos = {{"w", {3}, 3}};
  std::vector<float> p = {0.3f, -0.2f, 0.7f};
  const std::vector<float> g1 = {0.1f, 0.2f, -0.3f}, g2 = {-0.4f, 0.05f, 0.6f};
  SgdOptimizer original(infos, o);
  original.Step({p.data()}, {g1.data()}, {true});
  std::vector<float> resumed_p = p;
  SgdOptimizer resumed(infos, o);
  ASSERT_TRUE(resumed.RestoreMomentumBuffers(original.momentum_buffers()).ok());
  resumed.set_step_count(original.step_count());
  original.Step({p.data()}, {g2.data()}, {true});
  resumed.Step({resumed_p.data()}, {g2.data()}, {true});
  EXPECT_EQ(p, resumed_p);
  EXPECT_EQ(resumed.step_count(), 2u);

  EXPECT_EQ(resumed.RestoreMomentumBuffers({{1.0f}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resumed.RestoreMomentumBuffers({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resumed.RestoreMomentumBuffer("nope", {1, 2, 3}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(resumed.RestoreMomentumBuffer("w", {1, 2, 3}).ok());
  EXPECT_EQ(resumed.momentum_buffer("w")->at(2), 3.0f);
}

TEST(SgdTest, OptionsAreValidatedLikeTorch) {
  SgdOptions o;
  EXPECT_TRUE(ValidateSgdOptions(o).ok());
  o.nesterov = true;
  absl::Status s = ValidateSgdOptions(o);  // momentum 0
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("optimizer.nesterov"));
  o.momentum = 0.9;
  o.dampening = 0.1;
  EXPECT_EQ(ValidateSgdOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = SgdOptions();
  o.lr = 0;
  EXPECT_THAT(std::string(ValidateSgdOptions(o).message()), HasSubstr("optimizer.learning_rate"));
  o = SgdOptions();
  o.weight_decay = -1;
  EXPECT_THAT(std::string(ValidateSgdOptions(o).message()), HasSubstr("optimizer.weight_decay"));
  o = SgdOptions();
  o.momentum = -0.5;
  EXPECT_THAT(std::string(ValidateSgdOptions(o).message()), HasSubstr("optimizer.momentum"));
}

TEST(SgdMathTest, ElementUpdateWithoutMomentumIgnoresTheBuffer) {
  SgdElementParams h;
  h.lr = 0.5f;
  float p = 2.0f;
  SgdUpdateElement(&p, 1.0f, nullptr, false, h);
  EXPECT_EQ(p, 1.5f);
}

TEST(NormTest, L2NormOfOneAndSeveralTensors) {
  const std::vector<float> a = {3.0f, 4.0f};
  EXPECT_EQ(L2Norm(a.data(), a.size()), 5.0);
  EXPECT_EQ(L2Norm(a.data(), 0), 0.0);
  const std::vector<float> b = {3.0f}, c = {4.0f, 12.0f};
  EXPECT_EQ(L2Norm({b.data(), c.data()}, {1, 2}), 13.0);
  // Accumulated in double: 1e6 ones sum exactly to 1e6.
  const std::vector<float> ones(1000000, 1.0f);
  EXPECT_EQ(L2Norm(ones.data(), ones.size()), 1000.0);
}

// The optimizer's whole-tensor loops (vectorised) give exactly what the element function
// gives, for every combination of options, over several steps (the first one included).
TEST(SgdTest, TensorStepIsBitIdenticalToTheElementFunction) {
  const size_t n = 1003;  // not a multiple of any vector width
  for (double weight_decay : {0.0, 0.0005}) {
    for (double momentum : {0.0, 0.9}) {
      for (bool nesterov : {false, true}) {
        if (nesterov && momentum == 0.0) continue;
        SgdOptions options;
        options.lr = 0.05;
        options.momentum = momentum;
        options.dampening = nesterov ? 0.0 : 0.1;
        options.weight_decay = weight_decay;
        options.nesterov = nesterov;
        SgdOptimizer optimizer({{"w", {n}, n}}, options);
        const SgdElementParams h = ToElementParams(options);
        std::vector<float> param(n), expected(n), buffer(n), grad(n);
        for (size_t k = 0; k < n; ++k) param[k] = expected[k] = std::sin(0.37f * k);
        for (int step = 0; step < 4; ++step) {
          for (size_t k = 0; k < n; ++k) grad[k] = std::cos(0.11f * k + step) * 0.3f;
          optimizer.Step({param.data()}, {grad.data()}, {true});
          for (size_t k = 0; k < n; ++k) {
            SgdUpdateElement(&expected[k], grad[k], momentum != 0.0 ? &buffer[k] : nullptr,
                             step == 0, h);
          }
          for (size_t k = 0; k < n; ++k) {
            ASSERT_EQ(param[k], expected[k]) << "element " << k << " step " << step
                                             << " momentum " << momentum << " nesterov "
                                             << nesterov << " weight decay " << weight_decay;
          }
        }
      }
    }
  }
}

// strategy zero1: optimizers that each own a sub-range of the parameters, applied one after the
// other to the same tensors, leave them bit for bit where one unsharded optimizer does, with
// momentum only for the owned elements; a full (checkpoint) buffer restored into a sharded
// optimizer keeps the owned part and continues the same trajectory.
TEST(SgdTest, ShardedOptimizersTogetherMatchOneUnshardedOptimizer) {
  const std::vector<ParameterInfo> params = {{"a", {7}, 7}, {"b", {1000}, 1000}, {"c", {3}, 3}};
  // Three "ranks": a and the first half of b; the rest of b; c. Rank 1 owns nothing of a or c.
  const std::vector<std::vector<ElementRange>> owned = {
      {{0, 7}, {0, 497}, {}}, {{}, {497, 1000}, {}}, {{}, {}, {0, 3}}};
  for (bool nesterov : {false, true}) {
    SgdOptions options;
    options.lr = 0.05;
    options.momentum = 0.9;
    options.dampening = nesterov ? 0.0 : 0.1;
    options.weight_decay = 0.0005;
    options.nesterov = nesterov;
    SgdOptimizer whole(params, options);
    std::vector<SgdOptimizer> shards;
    for (const auto& o : owned) shards.emplace_back(params, options, o);
    std::vector<std::vector<float>> reference(3), sharded(3), grads(3);
    for (size_t i = 0; i < 3; ++i) {
      for (size_t k = 0; k < params[i].count; ++k) {
        reference[i].push_back(std::sin(0.37f * k + i));
      }
      sharded[i] = reference[i];
      grads[i].resize(params[i].count);
    }
    auto ptrs = [](std::vector<std::vector<float>>& v) {
      return std::vector<float*>{v[0].data(), v[1].data(), v[2].data()};
    };
    const std::vector<const float*> g = {grads[0].data(), grads[1].data(), grads[2].data()};
    for (int step = 0; step < 5; ++step) {
      for (size_t i = 0; i < 3; ++i) {
        for (size_t k = 0; k < grads[i].size(); ++k) {
          grads[i][k] = std::cos(0.11f * k + step + i) * 0.3f;
        }
      }
      // Parameter c has no gradient in step 0: its momentum starts a step later, as torch's.
      const std::vector<bool> has_grad = {true, true, step > 0};
      whole.Step(ptrs(reference), g, has_grad);
      for (SgdOptimizer& shard : shards) shard.Step(ptrs(sharded), g, has_grad);
      for (size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(sharded[i], reference[i]) << "parameter " << i << " step " << step;
      }
    }
    EXPECT_EQ(whole.momentum_elements(), 1010u);
    EXPECT_EQ(shards[0].momentum_elements(), 7u + 497u);
    EXPECT_EQ(shards[1].momentum_elements(), 503u);
    EXPECT_EQ(shards[2].momentum_elements(), 3u);
    EXPECT_TRUE(shards[1].momentum_buffers()[0].empty());
    EXPECT_EQ(shards[1].momentum_buffers()[1],
              std::vector<float>(whole.momentum_buffers()[1].begin() + 497,
                                 whole.momentum_buffers()[1].end()));

    // Resume: the whole optimizer's (checkpoint) buffers into fresh sharded optimizers.
    std::vector<SgdOptimizer> resumed;
    for (const auto& o : owned) {
      resumed.emplace_back(params, options, o);
      ASSERT_TRUE(resumed.back().RestoreMomentumBuffers(whole.momentum_buffers()).ok());
    }
    EXPECT_EQ(resumed[1].momentum_buffers()[1], shards[1].momentum_buffers()[1]);
    EXPECT_TRUE(resumed[1].momentum_buffers()[0].empty()) << "no shard of a: no buffer";
    for (size_t i = 0; i < 3; ++i) {
      for (float& v : grads[i]) v = -v;
    }
    whole.Step(ptrs(reference), g, {true, true, true});
    for (SgdOptimizer& shard : resumed) shard.Step(ptrs(sharded), g, {true, true, true});
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sharded[i], reference[i]) << "parameter " << i;
  }
}

// strategy zero2: the same step with only the owned elements' gradients (a copy of them, as the
// reduce-scattered shard holds) is bit-identical to Step with the full gradients.
TEST(SgdTest, StepOwnedMatchesStepWithTheFullGradients) {
  const std::vector<ParameterInfo> params = {{"a", {7}, 7}, {"b", {100}, 100}, {"c", {3}, 3}};
  const std::vector<ElementRange> owned = {{2, 7}, {40, 97}, {}};
  SgdOptions options;
  options.lr = 0.05;
  options.momentum = 0.9;
  options.weight_decay = 0.0005;
  SgdOptimizer full(params, options, owned), shard(params, options, owned);
  std::vector<std::vector<float>> a(3), b(3), grads(3), owned_grads(3);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t k = 0; k < params[i].count; ++k) a[i].push_back(std::sin(0.37f * k + i));
    b[i] = a[i];
  }
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < 3; ++i) {
      grads[i].clear();
      for (size_t k = 0; k < params[i].count; ++k) {
        grads[i].push_back(std::cos(0.11f * k + step + i) * 0.3f);
      }
      owned_grads[i].assign(grads[i].begin() + owned[i].begin, grads[i].begin() + owned[i].end);
    }
    const std::vector<bool> has_grad = {true, step > 0, true};
    full.Step({a[0].data(), a[1].data(), a[2].data()},
              {grads[0].data(), grads[1].data(), grads[2].data()}, has_grad);
    shard.StepOwned({b[0].data(), b[1].data(), b[2].data()},
                    {owned_grads[0].data(), owned_grads[1].data(), nullptr}, has_grad);
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(a[i], b[i]) << "parameter " << i << " step " << step;
  }
  EXPECT_EQ(full.momentum_buffers(), shard.momentum_buffers());
  EXPECT_EQ(shard.momentum_elements(), 5u + 57u);
}

// strategy fsdp: StepShard on a copy of the owned parameter elements alone ends exactly where
// Step leaves those elements of the full parameters.
TEST(SgdTest, StepShardMatchesStepOnTheOwnedElements) {
  const std::vector<ParameterInfo> params = {{"a", {7}, 7}, {"b", {100}, 100}, {"c", {3}, 3}};
  const std::vector<ElementRange> owned = {{2, 7}, {40, 97}, {}};
  SgdOptions options;
  options.lr = 0.05;
  options.momentum = 0.9;
  options.dampening = 0.1;
  options.weight_decay = 0.0005;
  SgdOptimizer full(params, options, owned), shard(params, options, owned);
  std::vector<std::vector<float>> a(3), b(3), grads(3), owned_grads(3);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t k = 0; k < params[i].count; ++k) a[i].push_back(std::sin(0.37f * k + i));
    b[i].assign(a[i].begin() + owned[i].begin, a[i].begin() + owned[i].end);
  }
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < 3; ++i) {
      grads[i].clear();
      for (size_t k = 0; k < params[i].count; ++k) {
        grads[i].push_back(std::cos(0.11f * k + step + i) * 0.3f);
      }
      owned_grads[i].assign(grads[i].begin() + owned[i].begin, grads[i].begin() + owned[i].end);
    }
    const std::vector<bool> has_grad = {true, step > 0, true};
    full.Step({a[0].data(), a[1].data(), a[2].data()},
              {grads[0].data(), grads[1].data(), grads[2].data()}, has_grad);
    shard.StepShard({b[0].data(), b[1].data(), nullptr},
                    {owned_grads[0].data(), owned_grads[1].data(), nullptr}, has_grad);
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(std::vector<float>(a[i].begin() + owned[i].begin, a[i].begin() + owned[i].end),
                b[i])
          << "parameter " << i << " step " << step;
    }
  }
  EXPECT_EQ(full.momentum_buffers(), shard.momentum_buffers());
}

TEST(SgdTest, ShardedRestoreRefusesABufferOfNeitherSize) {
  SgdOptions options;
  options.momentum = 0.9;
  SgdOptimizer shard({{"w", {10}, 10}}, options, {{2, 6}});
  EXPECT_TRUE(shard.sharded());
  EXPECT_TRUE(shard.RestoreMomentumBuffers({std::vector<float>(4, 1.0f)}).ok());
  EXPECT_EQ(shard.momentum_buffers()[0], std::vector<float>(4, 1.0f));
  std::vector<float> full(10);
  for (size_t k = 0; k < 10; ++k) full[k] = static_cast<float>(k);
  EXPECT_TRUE(shard.RestoreMomentumBuffer("w", full).ok());
  EXPECT_EQ(shard.momentum_buffers()[0], (std::vector<float>{2, 3, 4, 5}));
  const absl::Status wrong = shard.RestoreMomentumBuffers({std::vector<float>(5)});
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()),
              HasSubstr("momentum buffer of w: got 5 elements, the parameter has 10 and this "
                        "rank's shard of it 4"));
}

// The size rules both optimizers (CPU and GPU) apply to a restored momentum buffer.
TEST(SgdTest, MomentumElementsToKeepFollowsTheShard) {
  const ParameterInfo w{"w", {10}, 10};
  auto keep = [&](ElementRange owned, bool sharded, size_t size) {
    return MomentumElementsToKeep(w, owned, sharded, size);
  };
  // Unsharded: none, or the whole parameter kept whole.
  EXPECT_EQ(*keep({0, 10}, false, 0), (ElementRange{0, 0}));
  EXPECT_EQ(*keep({0, 10}, false, 10), (ElementRange{0, 10}));
  EXPECT_EQ(keep({0, 10}, false, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(keep({0, 10}, false, 4).status().message()),
              HasSubstr("momentum buffer of w: got 4 elements, the parameter has 10"));
  // Sharded [2, 6): the shard's own form whole, a whole buffer cut to the shard.
  EXPECT_EQ(*keep({2, 6}, true, 0), (ElementRange{0, 0}));
  EXPECT_EQ(*keep({2, 6}, true, 4), (ElementRange{0, 4}));
  EXPECT_EQ(*keep({2, 6}, true, 10), (ElementRange{2, 6}));
  EXPECT_THAT(std::string(keep({2, 6}, true, 5).status().message()),
              HasSubstr("momentum buffer of w: got 5 elements, the parameter has 10 and this "
                        "rank's shard of it 4"));
  // A shard without elements of w keeps nothing of a whole buffer; the whole parameter as the
  // shard (one rank) keeps it whole.
  EXPECT_TRUE(keep({10, 10}, true, 10)->empty());
  EXPECT_TRUE(keep({0, 0}, true, 0)->empty());
  EXPECT_EQ(*keep({0, 10}, true, 10), (ElementRange{0, 10}));
}

TEST(SgdTest, CheckOptimizerShardNamesTheBadRange) {
  const std::vector<ParameterInfo> params = {{"a", {4}, 4}, {"b", {3}, 3}};
  EXPECT_TRUE(CheckOptimizerShard(params, {{0, 4}, {0, 0}}).ok());
  EXPECT_TRUE(CheckOptimizerShard(params, {{4, 4}, {1, 3}}).ok());
  const absl::Status count = CheckOptimizerShard(params, {{0, 4}});
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(count.message(), "optimizer shard: 1 ranges for 2 parameters");
  const absl::Status past = CheckOptimizerShard(params, {{0, 4}, {1, 4}});
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(past.message(), "optimizer shard: range [1, 4) of b lies outside its 3 elements");
  EXPECT_FALSE(CheckOptimizerShard(params, {{3, 2}, {0, 0}}).ok());
}

}  // namespace
}  // namespace ringleader
