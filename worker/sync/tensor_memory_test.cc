// HostMemory's operations, the TensorBuffer / StagedBytes helpers, and the test memory's
// bounds checking (the reducer tests rely on it to catch accesses outside the seam).
#include "worker/sync/tensor_memory.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/recording_tensor_memory.h"

namespace ringleader {
namespace {

using sync_test::RecordingTensorMemory;
using Op = RecordingTensorMemory::Op;

TEST(TensorMemoryTest, HostOperations) {
  TensorMemory* m = HostMemory();
  EXPECT_EQ(m->kind(), MemoryKind::kHost);
  EXPECT_TRUE(m->host_accessible());
  auto buf = TensorBuffer<float>::Allocate(m, 5);
  ASSERT_TRUE(buf.ok());
  const float values[5] = {1.0f, -2.5f, 1.00390625f, 3e38f, -0.0f};
  ASSERT_TRUE(m->CopyFromHost(buf->data(), values, sizeof(values)).ok());
  std::vector<uint16_t> wire(5);
  ASSERT_TRUE(m->CastToBf16(buf->data(), wire.data(), 5).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(wire[i], FloatToBf16(values[i])) << i;
  ASSERT_TRUE(m->CastFromBf16(wire.data(), buf->data(), 5).ok());
  float back[5];
  ASSERT_TRUE(m->CopyToHost(back, buf->data(), sizeof(back)).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], Bf16ToFloat(wire[i])) << i;
  ASSERT_TRUE(m->Zero(buf->data() + 1, 2 * sizeof(float)).ok());
  ASSERT_TRUE(m->CopyToHost(back, buf->data(), sizeof(back)).ok());
  EXPECT_EQ(back[1], 0.0f);
  EXPECT_EQ(back[2], 0.0f);
  EXPECT_EQ(back[0], 1.0f);
}

TEST(TensorMemoryTest, MaxAbsDiffIsExactAndKeepsNan) {
  const std::vector<float> a = {1.0f, 2.0f, 3.0f};
  const std::vector<float> b = {1.0f, 2.5f, 1e-8f};
  const std::vector<float> c = {0.0f, std::nanf(""), 0.0f};
  std::vector<double> out;
  ASSERT_TRUE(HostMemory()
                  ->MaxAbsDiff({a.data(), a.data(), a.data()}, {b.data(), a.data(), c.data()},
                               {3, 3, 3}, &out)
                  .ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], static_cast<double>(3.0f) - static_cast<double>(1e-8f));  // exact in double
  EXPECT_EQ(out[1], 0.0);
  EXPECT_TRUE(std::isnan(out[2])) << "NaN anywhere makes the tensor's drift NaN";
  ASSERT_TRUE(HostMemory()->MaxAbsDiff({a.data()}, {b.data()}, {0}, &out).ok());
  EXPECT_EQ(out[0], 0.0);
}

TEST(TensorMemoryTest, StagedBytesRunInPlaceOnHostMemoryAndCopyOtherwise) {
  auto host = StagedBytes::Create(HostMemory(), 8);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->wire(), static_cast<void*>(host->host())) << "no copy on host memory";
  EXPECT_TRUE(host->Upload().ok());

  RecordingTensorMemory memory;
  {
    auto staged = StagedBytes::Create(&memory, 8);
    ASSERT_TRUE(staged.ok());
    EXPECT_NE(staged->wire(), static_cast<void*>(staged->host()));
    EXPECT_TRUE(memory.Contains(staged->wire(), 8));
    EXPECT_EQ(staged->view().count, 8u);
    EXPECT_EQ(staged->view().dtype, DataType::kUInt8);
    staged->host()[3] = 42;
    ASSERT_TRUE(staged->Upload().ok());
    staged->host()[3] = 0;
    ASSERT_TRUE(staged->Download().ok());
    EXPECT_EQ(staged->host()[3], 42);
    EXPECT_EQ(memory.count(Op::kCopyFromHost), 1u);
    EXPECT_EQ(memory.count(Op::kCopyToHost), 1u);
  }
  EXPECT_EQ(memory.live_allocations(), 0u) << "freed with the StagedBytes";
  EXPECT_THAT(memory.violations(), ::testing::IsEmpty());
}

TEST(TensorMemoryTest, TensorBufferMovesOwnership) {
  RecordingTensorMemory memory;
  auto a = TensorBuffer<float>::Allocate(&memory, 4);
  ASSERT_TRUE(a.ok());
  float* p = a->data();
  TensorBuffer<float> b = std::move(*a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(a->data(), nullptr);
  EXPECT_EQ(memory.live_allocations(), 1u);
  b = TensorBuffer<float>();
  EXPECT_EQ(memory.live_allocations(), 0u);
  EXPECT_EQ(memory.count(Op::kFree), 1u);
}

TEST(TensorMemoryTest, RecordingMemoryPoisonsAndFlagsOutOfRangeAccess) {
  RecordingTensorMemory memory;
  auto buf = TensorBuffer<float>::Allocate(&memory, 4);
  ASSERT_TRUE(buf.ok());
  float v[4];
  ASSERT_TRUE(memory.CopyToHost(v, buf->data(), sizeof(v)).ok());
  for (float f : v) EXPECT_TRUE(std::isnan(f)) << "fresh allocations read as NaN";
  EXPECT_THAT(memory.violations(), ::testing::IsEmpty());
  absl::Status past_end = memory.Zero(buf->data() + 2, 3 * sizeof(float));
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInternal) << "refused, nothing written";
  ASSERT_EQ(memory.violations().size(), 1u) << "one float past the end";
  EXPECT_THAT(memory.violations()[0], ::testing::HasSubstr("Zero"));
  float outside[2] = {0, 0};
  memory.Zero(outside, sizeof(outside)).IgnoreError();
  EXPECT_EQ(memory.violations().size(), 2u) << "host memory the test memory never handed out";
}

TEST(TensorMemoryTest, GuardedPoolIsReachableOnlyThroughItsOperations) {
  RecordingTensorMemory memory(MemoryKind::kDevice, /*guard=*/true);
  auto buf = TensorBuffer<float>::Allocate(&memory, 8);
  ASSERT_TRUE(buf.ok());
  const float one = 1.0f;
  ASSERT_TRUE(memory.CopyFromHost(buf->data() + 3, &one, sizeof(one)).ok());
  float back = 0;
  ASSERT_TRUE(memory.CopyToHost(&back, buf->data() + 3, sizeof(back)).ok());
  EXPECT_EQ(back, 1.0f);
  memory.WithAccess([&] { back = buf->data()[3]; });
  EXPECT_EQ(back, 1.0f);
  float* raw = buf->data();
  EXPECT_DEATH({ raw[3] = 2.0f; }, "") << "a direct write must fault";
}

TEST(TensorMemoryTest, MismatchNamesBackendAndBothKinds) {
  class DeviceComm : public Collective {
   public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    std::string backend_name() const override { return "nccl"; }
    MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
    std::shared_ptr<Work> AllReduce(TensorView, ReduceOp, const CollectiveOptions&) override {
      return nullptr;
    }
    std::shared_ptr<Work> Broadcast(TensorView, int, const CollectiveOptions&) override {
      return nullptr;
    }
    std::shared_ptr<Work> AllGather(TensorView, TensorView, const CollectiveOptions&) override {
      return nullptr;
    }
    std::shared_ptr<Work> ReduceScatter(TensorView, TensorView, ReduceOp,
                                        const CollectiveOptions&) override {
      return nullptr;
    }
    std::shared_ptr<Work> Barrier(const CollectiveOptions&) override { return nullptr; }
    void Abort(const absl::Status&) override {}
    absl::Status Close(absl::Duration) override { return absl::OkStatus(); }
  } comm;
  absl::Status s = CheckMemoryMatches(comm, nullptr, "reducer");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "reducer: backend 'nccl' works on device memory but its working memory is host "
            "memory (the default host memory): pass the trainer's TensorMemory for that backend "
            "(for NCCL, the GPU runner's device memory)");
  RecordingTensorMemory device(MemoryKind::kDevice);
  EXPECT_TRUE(CheckMemoryMatches(comm, &device, "reducer").ok());
}

}  // namespace
}  // namespace ringleader
