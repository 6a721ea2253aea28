#include "worker/sync/buffer_sync.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using sync_test::FakeCollective;
using ::testing::HasSubstr;
using ::testing::Not;

struct Buffers {
  std::vector<float> mean = {1, 2, 3};
  std::unique_ptr<bool[]> mask{new bool[4]{true, false, true, true}};
  std::vector<BufferInfo> infos() {
    return {BufferInfo{"bn.running_mean", BufferType::kFloat32, mean.size(), mean.data()},
            BufferInfo{"attn.mask", BufferType::kBool, 4, mask.get()}};
  }
};

TEST(BufferSyncTest, NcclRefusesBoolBuffersBeforeAnyCollective) {
  Buffers b;
  absl::Status s = CheckBuffersForBackend("nccl", b.infos(), /*ignore_bool_buffers=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("attn.mask"));
  EXPECT_THAT(s.message(), Not(HasSubstr("bn.running_mean")));
  EXPECT_THAT(s.message(), HasSubstr("sync.ignore_bool_buffers: true"));
  EXPECT_TRUE(CheckBuffersForBackend("nccl", b.infos(), true).ok());
  EXPECT_TRUE(CheckBuffersForBackend("gloo", b.infos(), false).ok());

  FakeCollective nccl("nccl");
  s = BroadcastBuffers(&nccl, b.infos(), BufferSyncOptions());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(nccl.calls().empty()) << "refused before any collective";

  BufferSyncOptions ignore;
  ignore.ignore_bool_buffers = true;
  ASSERT_TRUE(BroadcastBuffers(&nccl, b.infos(), ignore).ok());
  ASSERT_EQ(nccl.calls().size(), 1u) << "only the float buffer";
  EXPECT_EQ(nccl.calls()[0].dtype, DataType::kFloat32);
}

TEST(BufferSyncTest, RejectsBufferWithoutData) {
  std::vector<BufferInfo> infos = {BufferInfo{"ghost", BufferType::kFloat32, 3, nullptr}};
  absl::Status s = CheckBuffersForBackend("gloo", infos, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ghost"));
}

TEST(BufferSyncTest, BroadcastMakesEveryRankEqualToRankZero) {
  constexpr int kWorld = 3;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<Buffers> bufs(kWorld);
  std::vector<Buffers> ignored(kWorld);
  std::vector<absl::Status> results(kWorld), ignored_results(kWorld), off_results(kWorld);
  std::vector<CollectiveLedger> ledgers(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    for (auto* b : {&bufs[r], &ignored[r]}) {
      for (float& v : b->mean) v += 10 * r;
      b->mask[1] = (r % 2 == 1);
      b->mask[2] = (r == 0);
    }
  }
  sync_test::RunRanks(kWorld, [&](int r) {
    BufferSyncOptions off;
    off.broadcast_buffers = false;
    off_results[r] = BroadcastBuffers(ranks[r].get(), bufs[r].infos(), off);
    results[r] = BroadcastBuffers(ranks[r].get(), bufs[r].infos(), {}, &ledgers[r]);
    BufferSyncOptions ignore;
    ignore.ignore_bool_buffers = true;
    ignored_results[r] = BroadcastBuffers(ranks[r].get(), ignored[r].infos(), ignore);
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(off_results[r].ok()) << off_results[r];
    ASSERT_TRUE(results[r].ok()) << results[r];
    ASSERT_TRUE(ignored_results[r].ok()) << ignored_results[r];
    EXPECT_EQ(bufs[r].mean, (std::vector<float>{1, 2, 3})) << "rank " << r;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bufs[r].mask[i], bufs[0].mask[i]) << "rank " << r;
    EXPECT_EQ(bufs[r].mask[2], true);
    EXPECT_EQ(ignored[r].mean, (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(ignored[r].mask[2], r == 0) << "ignored bool buffer keeps its own value";
    auto records = ledgers[r].TakeWindow();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[1].dtype, DataType::kUInt8);
    EXPECT_EQ(records[1].bucket, kTagBuffer);
  }
}

}  // namespace
}  // namespace ringleader
