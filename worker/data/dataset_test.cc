#include "worker/data/dataset.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(SyntheticDatasetTest, ShapeLabelsAndDeterminism) {
  const Dataset a = MakeSyntheticDataset(300, 7, 5, 42);
  EXPECT_EQ(a.size, 300u);
  EXPECT_EQ(a.features, 7u);
  EXPECT_EQ(a.num_classes, 5);
  EXPECT_EQ(a.x.size(), 300u * 7u);
  ASSERT_EQ(a.y.size(), 300u);
  std::vector<int> per_class(5, 0);
  for (int32_t label : a.y) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 5);
    ++per_class[label];
  }
  for (int c = 0; c < 5; ++c) EXPECT_GT(per_class[c], 30) << "class " << c;
  const Dataset same = MakeSyntheticDataset(300, 7, 5, 42);
  EXPECT_EQ(a.x, same.x);
  EXPECT_EQ(a.y, same.y);
  const Dataset other = MakeSyntheticDataset(300, 7, 5, 43);
  EXPECT_NE(a.x, other.x);
}

TEST(SyntheticDatasetTest, ExamplesSitNearerTheirOwnClassMean) {
  // Learnable: the nearest class mean (estimated from the data) predicts the label.
  const Dataset d = MakeSyntheticDataset(1000, 10, 3, 7);
  std::vector<std::vector<double>> mean(3, std::vector<double>(10, 0.0));
  std::vector<int> count(3, 0);
  for (size_t i = 0; i < d.size; ++i) {
    ++count[d.y[i]];
    for (size_t f = 0; f < 10; ++f) mean[d.y[i]][f] += d.example(i)[f];
  }
  for (int c = 0; c < 3; ++c) {
    for (double& m : mean[c]) m /= count[c];
  }
  size_t correct = 0;
  for (size_t i = 0; i < d.size; ++i) {
    int best = 0;
    double best_dist = 1e300;
    for (int c = 0; c < 3; ++c) {
      double dist = 0;
      for (size_t f = 0; f < 10; ++f) {
        const double diff = d.example(i)[f] - mean[c][f];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = c;
    }
    if (best == d.y[i]) ++correct;
  }
  EXPECT_GT(correct, 950u);
}

TEST(GatherBatchTest, CopiesTheChosenRowsInOrder) {
  const Dataset d = MakeSyntheticDataset(10, 3, 2, 1);
  std::vector<float> x;
  std::vector<int32_t> y;
  GatherBatch(d, {7, 2}, &x, &y);
  ASSERT_EQ(x.size(), 6u);
  EXPECT_EQ(std::vector<float>(x.begin(), x.begin() + 3),
            std::vector<float>(d.example(7), d.example(7) + 3));
  EXPECT_EQ(std::vector<float>(x.begin() + 3, x.end()),
            std::vector<float>(d.example(2), d.example(2) + 3));
  EXPECT_EQ(y, (std::vector<int32_t>{d.y[7], d.y[2]}));
}

}  // namespace
}  // namespace ringleader
