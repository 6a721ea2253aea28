// HeapInUseBytes / HeapGrowth against blocks of known size (glibc's counters).
#include "worker/rank/heap_usage.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

constexpr size_t kSmallBlock = 64 * 1024;        // from an arena (below the mmap threshold)
constexpr size_t kLargeBlock = 64 * 1024 * 1024;  // mmapped

// A block the compiler cannot elide: written through, then read back by the test.
std::unique_ptr<char[]> Allocate(size_t size) {
  std::unique_ptr<char[]> block(new char[size]);
  std::memset(block.get(), 1, size);
  return block;
}

TEST(HeapUsageTest, InUseGrowsByAnAllocatedBlockAndDropsWhenItIsFreed) {
  for (size_t size : {kSmallBlock, kLargeBlock}) {
    const uint64_t before = HeapInUseBytes();
    ASSERT_GT(before, 0u) << "no mallinfo2 in this C library";
    std::unique_ptr<char[]> block = Allocate(size);
    const uint64_t held = HeapInUseBytes();
    EXPECT_GE(held - before, size) << "block of " << size << " bytes";
    EXPECT_EQ(block[size - 1], 1);
    block.reset();
    EXPECT_LT(HeapInUseBytes(), held - size / 2) << "block of " << size << " bytes";
  }
}

TEST(HeapUsageTest, GrowthKeepsTheHighWaterMarkOverTheBaseline) {
  HeapGrowth growth;
  EXPECT_FALSE(growth.started());
  growth.Sample();  // before Start: nothing
  EXPECT_EQ(growth.peak_bytes(), 0u);

  growth.Start();
  std::unique_ptr<char[]> block = Allocate(kLargeBlock);
  growth.Sample();
  const uint64_t with_block = growth.peak_bytes();
  EXPECT_GE(with_block, kLargeBlock);
  EXPECT_LT(with_block, 2 * kLargeBlock);

  block.reset();
  growth.Sample();  // lower now: the mark stays
  EXPECT_EQ(growth.peak_bytes(), with_block);

  growth.Start();  // a new baseline forgets the mark
  growth.Sample();
  EXPECT_LT(growth.peak_bytes(), kLargeBlock);
}

TEST(HeapUsageTest, BaselineMovesByWorkOutsideTheMeasuredState) {
  HeapGrowth growth;
  growth.Start();
  const uint64_t before = HeapInUseBytes();
  std::unique_ptr<char[]> data = Allocate(kLargeBlock);  // e.g. a data set loaded late
  growth.MoveBaseline(before, HeapInUseBytes());
  growth.Sample();
  EXPECT_LT(growth.peak_bytes(), kLargeBlock / 2);
  EXPECT_EQ(data[0], 1);
}

TEST(HeapUsageTest, SamplerCatchesABlockFreedBeforeItStops) {
  HeapGrowth growth;
  growth.Start();
  {
    HeapSampler sampler(&growth, absl::Milliseconds(1));
    std::unique_ptr<char[]> transient = Allocate(kLargeBlock);
    // Two samples after the allocation: at least one of them began after it.
    const uint64_t taken = sampler.samples_taken();
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (sampler.samples_taken() < taken + 2 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GE(sampler.samples_taken(), taken + 2) << "the sampler never ran";
    EXPECT_EQ(transient[kLargeBlock / 2], 1);
  }  // freed before the sampler stops; its last sample sees less
  EXPECT_GE(growth.peak_bytes(), kLargeBlock);
}

}  // namespace
}  // namespace ringleader
