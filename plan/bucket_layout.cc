#include "plan/bucket_layout.h"

#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringleader {

std::vector<size_t> BucketLayout::ParameterOrder() const {
  std::vector<size_t> order;
  order.reserve(param_bucket.size());
  for (const Bucket& b : buckets) order.insert(order.end(), b.params.begin(), b.params.end());
  return order;
}

std::vector<size_t> ReverseRegistrationOrder(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

absl::StatusOr<BucketLayout> ComputeBucketLayout(const std::vector<size_t>& counts,
                                                 const std::vector<size_t>& order,
                                                 const BucketLayoutOptions& opts) {
  const size_t n = counts.size();
  if (n == 0) return absl::InvalidArgumentError("bucket layout: the model has no parameters");
  if (opts.element_bytes == 0) {
    return absl::InvalidArgumentError("bucket layout: element_bytes must be > 0");
  }
  if (opts.first_bucket_bytes == 0 || opts.bucket_cap_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket layout: first_bucket_bytes (", opts.first_bucket_bytes,
        ") and bucket_cap_bytes (", opts.bucket_cap_bytes, ") must be > 0"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket layout: parameter ", i, " has 0 elements"));
    }
  }
  if (order.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("bucket layout: order has ", order.size(),
                                                   " entries for ", n, " parameters"));
  }
  std::vector<bool> seen(n, false);
  for (size_t p : order) {
    if (p >= n || seen[p]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket layout: order is not a permutation of 0..", n - 1, " (bad entry ", p, ")"));
    }
    seen[p] = true;
  }

  BucketLayout layout;
  layout.param_bucket.assign(n, 0);
  layout.param_offset.assign(n, 0);
  layout.param_count = counts;
  layout.extra_tail = opts.extra_tail;
  size_t limit = opts.first_bucket_bytes;
  size_t offset = 0;
  Bucket current;
  current.offset = 0;
  for (size_t p : order) {
    layout.param_bucket[p] = layout.buckets.size();
    layout.param_offset[p] = offset;
    current.params.push_back(p);
    current.count += counts[p];
    offset += counts[p];
    // Close the bucket once it reached its limit (DDP: a bucket may overshoot by one parameter).
    if (current.count * opts.element_bytes >= limit) {
      layout.buckets.push_back(std::move(current));
      current = Bucket();
      current.offset = offset;
      limit = opts.bucket_cap_bytes;
    }
  }
  if (!current.params.empty()) layout.buckets.push_back(std::move(current));
  layout.gradient_count = offset;
  return layout;
}

std::string DescribeLayout(const BucketLayout& layout) {
  std::string out;
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    const Bucket& bucket = layout.buckets[b];
    std::vector<size_t> shown(bucket.params.begin(),
                              bucket.params.begin() + std::min<size_t>(bucket.params.size(), 8));
    absl::StrAppendFormat(&out, "bucket %d: %d params, %d elements (%.2f MiB) [p%s%s]\n", b,
                          bucket.params.size(), bucket.count,
                          bucket.count * 4.0 / (1 << 20), absl::StrJoin(shown, " p"),
                          bucket.params.size() > shown.size() ? " ..." : "");
  }
  return out;
}

uint64_t LayoutFingerprint(const BucketLayout& layout) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(layout.buckets.size());
  for (const Bucket& b : layout.buckets) {
    mix(b.params.size());
    for (size_t p : b.params) mix(p);
  }
  return h;
}

}  // namespace ringleader
