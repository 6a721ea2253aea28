#include "worker/data/dataset.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace ringleader {
namespace {

// Uniform in (0, 1] from the top 53 bits, so log() below never sees 0.
double UniformOpen(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box–Muller; one value per call (simple and platform-independent).
double StandardNormal(std::mt19937_64& rng) {
  const double u1 = UniformOpen(rng);
  const double u2 = UniformOpen(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

void GatherBatch(const Dataset& d, const std::vector<size_t>& indices, std::vector<float>* x_out,
                 std::vector<int32_t>* y_out) {
  x_out->resize(indices.size() * d.features);
  y_out->resize(indices.size());
  for (size_t b = 0; b < indices.size(); ++b) {
    const size_t i = indices[b];
    if (i >= d.size) {
      std::fprintf(stderr, "GatherBatch: index %zu out of range (data set has %zu examples)\n", i,
                   d.size);
      std::abort();
    }
    std::memcpy(x_out->data() + b * d.features, d.example(i), d.features * sizeof(float));
    (*y_out)[b] = d.y[i];
  }
}

Dataset Slice(const Dataset& d, size_t begin, size_t end) {
  Dataset out;
  out.size = end - begin;
  out.features = d.features;
  out.num_classes = d.num_classes;
  out.x.assign(d.x.begin() + begin * d.features, d.x.begin() + end * d.features);
  out.y.assign(d.y.begin() + begin, d.y.begin() + end);
  return out;
}

Dataset MakeSyntheticDataset(size_t n, size_t features, int classes, uint64_t seed) {
  if (classes < 1) {
    std::fprintf(stderr, "MakeSyntheticDataset: classes must be >= 1, got %d\n", classes);
    std::abort();
  }
  std::mt19937_64 rng(seed);
  std::vector<float> centres(static_cast<size_t>(classes) * features);
  for (float& c : centres) c = static_cast<float>(StandardNormal(rng));
  Dataset d;
  d.size = n;
  d.features = features;
  d.num_classes = classes;
  d.x.resize(n * features);
  d.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // Modulo bias over 2^64 is negligible and platform-independent.
    const int label = static_cast<int>(rng() % static_cast<uint64_t>(classes));
    d.y[i] = label;
    const float* centre = centres.data() + static_cast<size_t>(label) * features;
    float* row = d.x.data() + i * features;
    for (size_t f = 0; f < features; ++f) {
      row[f] = centre[f] + static_cast<float>(0.5 * StandardNormal(rng));
    }
  }
  return d;
}

}  // namespace ringleader
