// Euclidean norms of float tensors, accumulated in double so that every rank (and the CPU and
// GPU trainers) get the same figure for the same data regardless of vector width. Used for
// grad-norm equality checks and drift measurements.
#ifndef RINGLEADER_WORKER_TRAINER_NORM_H_
#define RINGLEADER_WORKER_TRAINER_NORM_H_

#include <cstddef>
#include <vector>

namespace ringleader {

// sqrt(sum v[i]^2), summed in index order in double.
double L2Norm(const float* v, size_t n);

// The norm of the concatenation of tensors[k] (counts[k] floats each), in order. The two
// vectors have equal length (checked; aborts otherwise).
double L2Norm(const std::vector<const float*>& tensors, const std::vector<size_t>& counts);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_NORM_H_
