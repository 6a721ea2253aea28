#include "worker/trainer/norm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ringleader {
namespace {

// A fixed summation order makes the result reproducible bit for bit (every run, every rank):
// four partial sums over the elements i % 4 == 0, 1, 2, 3, added as (s0 + s1) + (s2 + s3).
// Four independent chains instead of one: the adds no longer wait on each other (a grad norm
// is taken twice per step over every parameter).
double SumOfSquares(const float* v, size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = v[i], x1 = v[i + 1], x2 = v[i + 2], x3 = v[i + 3];
    s0 += x0 * x0;
    s1 += x1 * x1;
    s2 += x2 * x2;
    s3 += x3 * x3;
  }
  if (i < n) s0 += static_cast<double>(v[i]) * v[i];
  if (i + 1 < n) s1 += static_cast<double>(v[i + 1]) * v[i + 1];
  if (i + 2 < n) s2 += static_cast<double>(v[i + 2]) * v[i + 2];
  return (s0 + s1) + (s2 + s3);
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
