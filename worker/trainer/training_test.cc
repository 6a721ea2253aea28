// End-to-end training on one rank: Mlp + SgdOptimizer + DistributedSampler on synthetic data and
// on (a slice of) Fashion-MNIST.
#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/data/distributed_sampler.h"
#include "worker/data/fashion_mnist.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

// Trains `model` for `epochs` epochs over `train` with batch `batch`; returns the mean loss of
// the last epoch's steps.
double Train(Mlp* model, const Dataset& train, const SgdOptions& options, size_t batch,
             uint32_t epochs) {
  SgdOptimizer opt(model->parameters(), options);
  DistributedSampler sampler(train.size, 1, 0, /*seed=*/1);
  std::vector<float*> params;
  std::vector<const float*> grads;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    params.push_back(model->param(i));
    grads.push_back(model->grad(i));
  }
  const std::vector<bool> has_grad(params.size(), true);
  std::vector<float> x;
  std::vector<int32_t> y;
  double epoch_loss = 0.0;
  for (uint32_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<size_t> order = sampler.Indices(epoch);
    epoch_loss = 0.0;
    size_t steps = 0;
    for (size_t start = 0; start < order.size(); start += batch) {
      const std::vector<size_t> idx(order.begin() + start,
                                    order.begin() + std::min(order.size(), start + batch));
      GatherBatch(train, idx, &x, &y);
      model->ZeroGradients();
      absl::StatusOr<double> loss = model->ForwardBackward(x.data(), y.data(), idx.size(), {});
      EXPECT_TRUE(loss.ok()) << loss.status();
      if (!loss.ok()) return 0.0;
      epoch_loss += *loss;
      ++steps;
      opt.Step(params, grads, has_grad);
    }
    epoch_loss /= static_cast<double>(steps);
  }
  return epoch_loss;
}

TEST(TrainingTest, SyntheticClustersAreLearned) {
  // One draw split 2000 / 500, so train and test share class centres but no examples.
  const Dataset all = MakeSyntheticDataset(2500, 20, 4, 1);
  const Dataset train = Slice(all, 0, 2000);
  const Dataset test = Slice(all, 2000, 2500);
  Mlp model({20, 32, 4}, 3);
  const Mlp::EvalResult before = model.Evaluate(test, 256);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  Train(&model, train, o, 32, 3);
  const Mlp::EvalResult after = model.Evaluate(test, 256);
  EXPECT_LT(after.loss, before.loss / 2) << "before " << before.loss;
  EXPECT_GT(after.accuracy, 0.9);
  std::cout << "synthetic: loss " << before.loss << " -> " << after.loss << ", accuracy "
            << after.accuracy << "\n";
}

TEST(TrainingTest, OneEpochOnFashionMnistSliceReachesSeventyFivePercent) {
  struct stat st;
  if (::stat(kDefaultFashionMnistDir, &st) != 0) {
    GTEST_SKIP() << kDefaultFashionMnistDir << " is absent (package dataset-fashion-mnist)";
  }
  absl::StatusOr<FashionMnist> data = LoadFashionMnist(kDefaultFashionMnistDir, 10000, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train.size, 10000u);
  Mlp model({784, 256, 128, 10}, 1);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  Train(&model, data->train, o, 64, 1);
  const Mlp::EvalResult test = model.Evaluate(data->test, 1000);
  EXPECT_EQ(test.examples, 10000u);
  EXPECT_GE(test.accuracy, 0.75) << "loss " << test.loss;
  std::cout << "Fashion-MNIST, 1 epoch on 10000 examples: test accuracy " << test.accuracy
            << ", loss " << test.loss << "\n";
}

}  // namespace
}  // namespace ringleader
