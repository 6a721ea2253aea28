#include "worker/trainer/norm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ringleader {
namespace {

// Sequential on purpose: a fixed summation order makes the result reproducible bit for bit.
double SumOfSquares(const float* v, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double x = v[i];
    sum += x * x;
  }
  return sum;
}

}  // namespace

double L2Norm(const float* v, size_t n) { return std::sqrt(SumOfSquares(v, n)); }

double L2Norm(const std::vector<const float*>& tensors, const std::vector<size_t>& counts) {
  if (tensors.size() != counts.size()) {
    std::fprintf(stderr, "L2Norm: %zu tensors but %zu counts\n", tensors.size(), counts.size());
    std::abort();
  }
  double sum = 0.0;
  for (size_t k = 0; k < tensors.size(); ++k) sum += SumOfSquares(tensors[k], counts[k]);
  return std::sqrt(sum);
}

}  // namespace ringleader
