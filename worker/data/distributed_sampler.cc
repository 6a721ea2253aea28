#include "worker/data/distributed_sampler.h"

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <utility>

namespace ringleader {
namespace {

// Uniform in [0, bound) without modulo bias: reject the low (2^64 mod bound) raw values.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  while (true) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

DistributedSampler::DistributedSampler(size_t n, uint32_t world_size, uint32_t rank,
                                       uint64_t seed, bool shuffle)
    : n_(n), world_size_(world_size), rank_(rank), seed_(seed), shuffle_(shuffle) {
  if (world_size_ == 0 || rank_ >= world_size_) {
    std::fprintf(stderr, "DistributedSampler: rank %u is not in a world of size %u\n", rank_,
                 world_size_);
    std::abort();
  }
  num_samples_ = (n_ + world_size_ - 1) / world_size_;
}

std::vector<size_t> DistributedSampler::EpochPermutation(uint32_t epoch) const {
  std::vector<size_t> perm(n_);
  std::iota(perm.begin(), perm.end(), size_t{0});
  if (!shuffle_) return perm;
  // Seed + epoch, as torch's sampler does (g.manual_seed(self.seed + self.epoch)).
  std::mt19937_64 rng(seed_ + epoch);
  for (size_t i = n_; i > 1; --i) {
    const size_t j = static_cast<size_t>(UniformBelow(rng, i));
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

std::vector<size_t> DistributedSampler::Indices(uint32_t epoch) const {
  std::vector<size_t> out;
  if (n_ == 0) return out;
  const std::vector<size_t> perm = EpochPermutation(epoch);
  out.reserve(num_samples_);
  // Position k of the padded list is perm[k mod n] (padding repeats from the start).
  for (size_t k = rank_; k < total_size(); k += world_size_) out.push_back(perm[k % n_]);
  return out;
}

}  // namespace ringleader
