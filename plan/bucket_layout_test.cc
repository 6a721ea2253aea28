#include "plan/bucket_layout.h"

#include <numeric>
#include <set>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

BucketLayoutOptions Bytes(size_t first, size_t cap, size_t tail = 0) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = first;
  o.bucket_cap_bytes = cap;
  o.element_bytes = 4;
  o.extra_tail = tail;
  return o;
}

TEST(BucketLayoutTest, ReverseOrderFirstBucketThenCap) {
  // 6 parameters of 100 floats (400 bytes). First bucket closes at >= 400 bytes (1 param), then
  // every bucket at >= 1000 bytes (3 params: 1200 bytes, DDP-style overshoot by one parameter).
  std::vector<size_t> counts(6, 100);
  auto layout = ComputeBucketLayout(counts, ReverseRegistrationOrder(6), Bytes(400, 1000));
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->buckets.size(), 3u);
  EXPECT_EQ(layout->buckets[0].params, (std::vector<size_t>{5}));
  EXPECT_EQ(layout->buckets[1].params, (std::vector<size_t>{4, 3, 2}));
  EXPECT_EQ(layout->buckets[2].params, (std::vector<size_t>{1, 0}));  // the remainder
  EXPECT_EQ(layout->gradient_count, 600u);
}

TEST(BucketLayoutTest, SlotsAreContiguousAndCoverEveryParameterOnce) {
  std::vector<size_t> counts = {7, 1, 300, 12, 5, 90, 2, 64};
  auto layout = ComputeBucketLayout(counts, ReverseRegistrationOrder(counts.size()),
                                    Bytes(40, 100, /*tail=*/1));
  ASSERT_TRUE(layout.ok()) << layout.status();
  size_t expected_offset = 0;
  std::set<size_t> seen;
  for (size_t b = 0; b < layout->buckets.size(); ++b) {
    const Bucket& bucket = layout->buckets[b];
    EXPECT_EQ(bucket.offset, expected_offset);
    size_t in_bucket = 0;
    for (size_t p : bucket.params) {
      EXPECT_TRUE(seen.insert(p).second) << "parameter " << p << " twice";
      EXPECT_EQ(layout->param_bucket[p], b);
      EXPECT_EQ(layout->param_offset[p], expected_offset + in_bucket);
      in_bucket += counts[p];
    }
    EXPECT_EQ(bucket.count, in_bucket);
    expected_offset += in_bucket;
  }
  EXPECT_EQ(seen.size(), counts.size());
  EXPECT_EQ(layout->gradient_count, std::accumulate(counts.begin(), counts.end(), size_t{0}));
  // The tail (sentinel) rides with the last bucket's collective only.
  const size_t last = layout->buckets.size() - 1;
  EXPECT_EQ(layout->collective_count(last), layout->buckets[last].count + 1);
  EXPECT_EQ(layout->collective_count(0), layout->buckets[0].count);
  EXPECT_EQ(layout->arena_count(), layout->gradient_count + 1);
}

TEST(BucketLayoutTest, TinyCapGivesOneBucketPerParameter) {
  std::vector<size_t> counts = {3, 4, 5, 6};
  auto layout = ComputeBucketLayout(counts, ReverseRegistrationOrder(4), Bytes(1, 1));
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->buckets.size(), 4u);
  EXPECT_EQ(layout->ParameterOrder(), (std::vector<size_t>{3, 2, 1, 0}));
}

TEST(BucketLayoutTest, HugeCapGivesOneBucket) {
  std::vector<size_t> counts = {3, 4, 5, 6};
  auto layout = ComputeBucketLayout(counts, ReverseRegistrationOrder(4), Bytes(1 << 20, 1 << 20));
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->buckets.size(), 1u);
}

TEST(BucketLayoutTest, CustomOrderIsFollowedAndChangesTheFingerprint) {
  std::vector<size_t> counts = {10, 10, 10, 10};
  auto a = ComputeBucketLayout(counts, {0, 2, 1, 3}, Bytes(80, 80));
  auto b = ComputeBucketLayout(counts, ReverseRegistrationOrder(4), Bytes(80, 80));
  auto a2 = ComputeBucketLayout(counts, {0, 2, 1, 3}, Bytes(80, 80));
  ASSERT_TRUE(a.ok() && b.ok() && a2.ok());
  EXPECT_EQ(a->ParameterOrder(), (std::vector<size_t>{0, 2, 1, 3}));
  EXPECT_EQ(LayoutFingerprint(*a), LayoutFingerprint(*a2));
  EXPECT_NE(LayoutFingerprint(*a), LayoutFingerprint(*b));
  EXPECT_NE(DescribeLayout(*a).find("bucket 1: 2 params"), std::string::npos)
      << DescribeLayout(*a);
}

TEST(BucketLayoutTest, RejectsBadInput) {
  EXPECT_EQ(ComputeBucketLayout({}, {}, Bytes(4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeBucketLayout({1, 0}, {1, 0}, Bytes(4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeBucketLayout({1, 2}, {1, 1}, Bytes(4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeBucketLayout({1, 2}, {0}, Bytes(4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeBucketLayout({1, 2}, {0, 1}, Bytes(0, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
