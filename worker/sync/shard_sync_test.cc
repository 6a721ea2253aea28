#include "worker/sync/shard_sync.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "worker/sync/recording_tensor_memory.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

// What rank `rank` writes into element k of parameter i: distinct per rank, so the test sees
// whose value each element ends with.
float Value(int rank, size_t i, size_t k) {
  return static_cast<float>(rank * 1000000 + i * 10000 + k) + 0.25f;
}

// Parameters of 7, 0 (frozen) and 5 elements over 4 ranks: 12 elements, shards of 3, one of
// which spans two parameters; the owner's values land on every rank, nothing else changes.
TEST(ShardSyncTest, EveryRankEndsWithEachOwnersElements) {
  constexpr int kWorld = 4;
  const std::vector<size_t> counts = {7, 0, 5};
  const ShardPlan plan = PlanShards(counts, kWorld);
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<std::vector<std::vector<float>>> params(kWorld);
  std::vector<std::vector<CollectiveRecord>> records(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    params[r].resize(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) {
      for (size_t k = 0; k < counts[i]; ++k) params[r][i].push_back(Value(r, i, k));
    }
    std::vector<float*> ptrs;
    for (auto& p : params[r]) ptrs.push_back(p.data());
    CollectiveLedger ledger;
    ShardSyncOptions opts;
    opts.ledger = &ledger;
    ASSERT_TRUE(AllGatherParameterShards(ranks[r].get(), plan, ptrs, opts).ok());
    records[r] = ledger.TakeWindow();
  });
  for (int r = 0; r < kWorld; ++r) {
    for (int owner = 0; owner < kWorld; ++owner) {
      for (size_t i = 0; i < counts.size(); ++i) {
        const ElementRange& range = plan.owned[owner][i];
        for (size_t k = range.begin; k < range.end; ++k) {
          ASSERT_EQ(params[r][i][k], Value(owner, i, k))
              << "rank " << r << " parameter " << i << " element " << k;
        }
      }
    }
    ASSERT_EQ(records[r].size(), 1u);
    EXPECT_EQ(records[r][0].kind, CollectiveKind::kAllGather);
    EXPECT_EQ(records[r][0].bucket, kTagShardGather);
    EXPECT_EQ(records[r][0].count, plan.capacity);
  }
}

// A shard longer than one chunk goes in several gathers (one ledger record each), with
// parameters crossing the chunk boundaries; the staging stays one chunk per rank.
TEST(ShardSyncTest, AShardLongerThanAChunkIsGatheredChunkByChunk) {
  constexpr int kWorld = 2;
  const std::vector<size_t> counts = {300000, 5, 400000};  // shards of 350 003 elements
  const ShardPlan plan = PlanShards(counts, kWorld);
  ASSERT_GT(plan.capacity, kGatherChunkElements);
  const size_t chunks = (plan.capacity + kGatherChunkElements - 1) / kGatherChunkElements;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<std::vector<std::vector<float>>> params(kWorld);
  std::vector<std::vector<CollectiveRecord>> records(kWorld);
  std::vector<size_t> staging(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    params[r].resize(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) {
      for (size_t k = 0; k < counts[i]; ++k) params[r][i].push_back(Value(r, i, k));
    }
    std::vector<float*> ptrs;
    for (auto& p : params[r]) ptrs.push_back(p.data());
    CollectiveLedger ledger;
    ShardSyncOptions opts;
    opts.ledger = &ledger;
    opts.staging_bytes = &staging[r];
    ASSERT_TRUE(AllGatherParameterShards(ranks[r].get(), plan, ptrs, opts).ok());
    records[r] = ledger.TakeWindow();
  });
  for (int r = 0; r < kWorld; ++r) {
    for (int owner = 0; owner < kWorld; ++owner) {
      for (size_t i = 0; i < counts.size(); ++i) {
        const ElementRange& range = plan.owned[owner][i];
        for (size_t k = range.begin; k < range.end; ++k) {
          ASSERT_EQ(params[r][i][k], Value(owner, i, k))
              << "rank " << r << " parameter " << i << " element " << k;
        }
      }
    }
    EXPECT_EQ(records[r].size(), chunks);
    EXPECT_EQ(staging[r], kGatherChunkElements * (kWorld + 1) * sizeof(float));
  }
}

// Momentum shards come back whole; a parameter no rank holds a buffer for stays empty.
TEST(ShardSyncTest, MomentumShardsGatherIntoWholeBuffers) {
  constexpr int kWorld = 3;
  const std::vector<size_t> counts = {4, 6, 1};
  const ShardPlan plan = PlanShards(counts, kWorld);
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<absl::StatusOr<std::vector<std::vector<float>>>> gathered(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    std::vector<std::vector<float>> local(counts.size());
    for (size_t i = 0; i < 2; ++i) {  // parameter 2 has no momentum yet
      const ElementRange& range = plan.owned[r][i];
      for (size_t k = range.begin; k < range.end; ++k) local[i].push_back(Value(0, i, k));
    }
    gathered[r] = AllGatherMomentumShards(ranks[r].get(), plan, local, ShardSyncOptions());
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(gathered[r].ok()) << gathered[r].status();
    const std::vector<std::vector<float>>& full = *gathered[r];
    ASSERT_EQ(full.size(), 3u);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(full[i].size(), counts[i]);
      for (size_t k = 0; k < counts[i]; ++k) EXPECT_EQ(full[i][k], Value(0, i, k));
    }
    EXPECT_TRUE(full[2].empty());
  }
}

// The GPU runner's case: parameters in memory the host may not read (RecordingTensorMemory
// stands in for device memory: its own pool, NaN-filled, every access bounds-checked). Both
// gathers go through the memory's operations only (the momentum one staged with StagedBytes),
// give the host-memory results, and free their staging.
TEST(ShardSyncTest, BothGathersWorkThroughMemoryTheHostCannotRead) {
  constexpr int kWorld = 3;
  const std::vector<size_t> counts = {7, 0, 5};
  const ShardPlan plan = PlanShards(counts, kWorld);
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<std::unique_ptr<sync_test::RecordingTensorMemory>> memories;
  for (int r = 0; r < kWorld; ++r) {
    memories.push_back(std::make_unique<sync_test::RecordingTensorMemory>());
  }
  std::vector<std::vector<std::vector<float>>> params(kWorld);
  std::vector<absl::StatusOr<std::vector<std::vector<float>>>> momentum(kWorld);
  std::vector<size_t> staging(kWorld, 0);
  sync_test::RunRanks(kWorld, [&](int r) {
    sync_test::RecordingTensorMemory* memory = memories[r].get();
    std::vector<TensorBuffer<float>> buffers;
    std::vector<float*> ptrs;
    for (size_t i = 0; i < counts.size(); ++i) {
      std::vector<float> host;
      for (size_t k = 0; k < counts[i]; ++k) host.push_back(Value(r, i, k));
      auto buffer = TensorBuffer<float>::Allocate(memory, std::max<size_t>(counts[i], 1));
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      ASSERT_TRUE(memory->CopyFromHost(buffer->data(), host.data(), host.size() * sizeof(float))
                      .ok());
      ptrs.push_back(buffer->data());
      buffers.push_back(*std::move(buffer));
    }
    ShardSyncOptions opts;
    opts.memory = memory;
    opts.staging_bytes = &staging[r];
    ASSERT_TRUE(AllGatherParameterShards(ranks[r].get(), plan, ptrs, opts).ok());
    params[r].resize(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) {
      params[r][i].resize(counts[i]);
      ASSERT_TRUE(
          memory->CopyToHost(params[r][i].data(), ptrs[i], counts[i] * sizeof(float)).ok());
    }
    std::vector<std::vector<float>> local(counts.size());
    const ElementRange& range = plan.owned[r][0];
    for (size_t k = range.begin; k < range.end; ++k) local[0].push_back(Value(0, 0, k));
    EXPECT_EQ(memory->live_allocations(), counts.size()) << "the parameter gather's staging";
    momentum[r] = AllGatherMomentumShards(ranks[r].get(), plan, local, opts);
    EXPECT_EQ(memory->live_allocations(), counts.size()) << "the momentum gather's staging";
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(memories[r]->violations().empty()) << memories[r]->violations()[0];
    EXPECT_EQ(staging[r], GatherChunkElements(plan) * (kWorld + 1) * sizeof(float));
    for (int owner = 0; owner < kWorld; ++owner) {
      for (size_t i = 0; i < counts.size(); ++i) {
        const ElementRange& range = plan.owned[owner][i];
        for (size_t k = range.begin; k < range.end; ++k) {
          ASSERT_EQ(params[r][i][k], Value(owner, i, k))
              << "rank " << r << " parameter " << i << " element " << k;
        }
      }
    }
    ASSERT_TRUE(momentum[r].ok()) << momentum[r].status();
    const std::vector<std::vector<float>>& full = *momentum[r];
    ASSERT_EQ(full.size(), 3u);
    ASSERT_EQ(full[0].size(), counts[0]);
    for (size_t k = 0; k < counts[0]; ++k) EXPECT_EQ(full[0][k], Value(0, 0, k)) << k;
    EXPECT_TRUE(full[1].empty());
    EXPECT_TRUE(full[2].empty()) << "no rank holds a buffer of parameter 2";
  }
}

TEST(ShardSyncTest, APlanForAnotherWorldIsRefused) {
  sync_test::FakeCollective one;
  std::vector<float> p(4);
  const absl::Status s =
      AllGatherParameterShards(&one, PlanShards({4}, 2), {p.data()}, ShardSyncOptions());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AllGatherParameterShards(&one, PlanShards({4}, 1), {p.data()}, ShardSyncOptions())
                  .ok());
  const auto wrong = AllGatherMomentumShards(&one, PlanShards({4}, 1), {std::vector<float>(3)},
                                             ShardSyncOptions());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
