// Which examples each rank trains on in each epoch: torch.utils.data.DistributedSampler
// semantics with drop_last = false.
//
// Per epoch e (shuffle on):
//   perm    = a permutation of [0, n), seeded by seed + e          (same on every rank)
//   padded  = perm + perm[0 .. pad)   (repeating from the start, cyclically if pad > n),
//             length num_samples × world_size, num_samples = ceil(n / world_size)
//   rank r  = padded[r], padded[r + world], padded[r + 2·world], ...
// With shuffle off, perm is 0, 1, ..., n-1.
//
// The permutation is a Fisher–Yates shuffle driven by std::mt19937_64 (fully specified by the
// C++ standard) with our own unbiased bounded draw, so it is identical on every platform and
// in every process. It is NOT torch's RNG: the same seed gives a different order than
// torch.randperm.
#ifndef RINGLEADER_WORKER_DATA_DISTRIBUTED_SAMPLER_H_
#define RINGLEADER_WORKER_DATA_DISTRIBUTED_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringleader {

// Immutable after construction; thread-safe.
class DistributedSampler {
 public:
  // `world_size` >= 1 and `rank` < world_size (checked; aborts otherwise: ranks come from the
  // coordinator, a bad one is a bug).
  DistributedSampler(size_t n, uint32_t world_size, uint32_t rank, uint64_t seed,
                     bool shuffle = true);

  // This rank's indices for `epoch`, num_samples() of them, in training order.
  std::vector<size_t> Indices(uint32_t epoch) const;

  // Examples per rank per epoch: ceil(n / world_size).
  size_t num_samples() const { return num_samples_; }
  // num_samples() × world_size: the padded epoch length.
  size_t total_size() const { return num_samples_ * world_size_; }
  size_t dataset_size() const { return n_; }

  // The full permutation of [0, n) used in `epoch` (before padding), the same on every rank.
  std::vector<size_t> EpochPermutation(uint32_t epoch) const;

 private:
  size_t n_;
  uint32_t world_size_;
  uint32_t rank_;
  uint64_t seed_;
  bool shuffle_;
  size_t num_samples_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DATA_DISTRIBUTED_SAMPLER_H_
