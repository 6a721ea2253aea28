// Assignment of parameters to gradient buckets, and where each gradient lives in the flat
// gradient arena (PyTorch DDP's compute_bucket_assignment_by_size + gradient_as_bucket_view).
//
// Parameters are taken in a given order (reverse registration order at first: backward produces
// the last layer's gradients first; after the first step optionally the observed ready order).
// They fill bucket 0 until it holds at least `first_bucket_bytes`, then each later bucket until
// it holds at least `bucket_cap_bytes`; a bucket closes once it reaches its limit, so it may
// exceed the limit by its last parameter (DDP does the same; a parameter is never split).
// Buckets are grouped by dtype and device in DDP; every ParameterInfo here is float32 in the
// memory of one device, so there is one group.
//
// Arena: bucket b occupies elements [offset, offset + count) of one flat float array, its
// parameters' slots back to back in bucket order. After the last bucket the arena has
// `extra_tail` more elements (the reducer's readiness sentinel, see worker/sync/reducer.h),
// which belong to the last bucket's collective: `collective_count(b)`.
//
//   arena: | b0: p9 p8 | b1: p7 p6 p5 | ... | bL: p1 p0 | tail |
#ifndef RINGLEADER_PLAN_BUCKET_LAYOUT_H_
#define RINGLEADER_PLAN_BUCKET_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringleader {

struct Bucket {
  std::vector<size_t> params;  // parameter indices, in slot order
  size_t offset = 0;           // first arena element of the bucket
  size_t count = 0;            // gradient elements (the tail excluded)
};

// Immutable once computed; plain value type.
struct BucketLayout {
  std::vector<Bucket> buckets;        // in collective (launch) order
  std::vector<size_t> param_bucket;   // parameter index -> bucket index
  std::vector<size_t> param_offset;   // parameter index -> arena offset of its slot
  std::vector<size_t> param_count;    // parameter index -> elements
  size_t gradient_count = 0;          // sum of all parameter counts
  size_t extra_tail = 0;              // elements after the last bucket (see file comment)

  size_t arena_count() const { return gradient_count + extra_tail; }
  // Elements the collective of bucket b reduces (the tail rides with the last bucket).
  size_t collective_count(size_t b) const {
    return buckets[b].count + (b + 1 == buckets.size() ? extra_tail : 0);
  }
  // The order in which parameters were assigned (bucket 0's slots first).
  std::vector<size_t> ParameterOrder() const;
};

struct BucketLayoutOptions {
  size_t first_bucket_bytes = 1 << 20;    // 1 MiB, DDP's first bucket
  size_t bucket_cap_bytes = 25 << 20;     // 25 MiB, DDP's bucket_cap_mb
  size_t element_bytes = 4;               // float32 gradients
  size_t extra_tail = 0;                  // elements appended after the last bucket
};

// Parameters n-1, n-2, ..., 0.
std::vector<size_t> ReverseRegistrationOrder(size_t n);

// Assigns parameters (element counts `counts`, indexed by registration) to buckets in `order`.
// Errors: INVALID_ARGUMENT if `counts` is empty, a count is 0, `order` is not a permutation of
// 0..n-1, or a byte limit / element_bytes is 0 (each naming the offending value).
absl::StatusOr<BucketLayout> ComputeBucketLayout(const std::vector<size_t>& counts,
                                                 const std::vector<size_t>& order,
                                                 const BucketLayoutOptions& opts);

// One line per bucket: "bucket 0: 3 params, 262144 elements (1.00 MiB) [p9 p8 p7]".
std::string DescribeLayout(const BucketLayout& layout);

// FNV-1a over (bucket count, each bucket's parameter indices). Equal layouts, equal fingerprints.
uint64_t LayoutFingerprint(const BucketLayout& layout);

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_BUCKET_LAYOUT_H_
