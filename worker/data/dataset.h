// An in-memory classification data set: dense float features and integer labels.
//
// Fashion-MNIST comes from fashion_mnist.h; MakeSyntheticDataset gives a small learnable set for
// fast tests.
#ifndef RINGLEADER_WORKER_DATA_DATASET_H_
#define RINGLEADER_WORKER_DATA_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringleader {

// `size` examples of `features` floats each, row-major in `x` (size × features); `y[i]` in
// [0, num_classes).
struct Dataset {
  size_t size = 0;
  size_t features = 0;
  std::vector<float> x;
  std::vector<int32_t> y;
  int num_classes = 0;

  const float* example(size_t i) const { return x.data() + i * features; }
};

// Copies the examples at `indices` (in that order) into a contiguous batch: x_out gets
// indices.size() × d.features floats, y_out indices.size() labels (both resized). Every index
// must be < d.size (checked; aborts otherwise).
void GatherBatch(const Dataset& d, const std::vector<size_t>& indices, std::vector<float>* x_out,
                 std::vector<int32_t>* y_out);

// Examples [begin, end) of `d`, copied (begin <= end <= d.size).
Dataset Slice(const Dataset& d, size_t begin, size_t end);

// A deterministic, learnable data set: `classes` Gaussian clusters. Each class has a centre with
// coordinates ~ N(0, 1); an example is its class centre plus N(0, 0.5^2) noise per feature;
// labels are drawn uniformly. The same arguments give the same data set in every process
// (std::mt19937_64 and our own Box–Muller transform, not std::normal_distribution, whose
// algorithm differs between standard libraries).
// Requires classes >= 1 (checked; aborts otherwise).
Dataset MakeSyntheticDataset(size_t n, size_t features, int classes, uint64_t seed);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DATA_DATASET_H_
