// The unique-id relay with the real ncclGetUniqueId (it needs no GPU) over an in-memory store.
#include "worker/collective/gpu/nccl_unique_id.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/rank_threads.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Bytes(const ncclUniqueId& id) { return std::string(id.internal, sizeof(id.internal)); }

TEST(NcclUniqueIdTest, RelaysRankZerosIdByteExactToEveryRank) {
  InMemoryKeyValueStore store;
  constexpr int kWorld = 3;
  std::vector<absl::StatusOr<ncclUniqueId>> ids(kWorld, absl::UnknownError("not run"));
  RunRanks(kWorld, [&](int rank) {
    ids[rank] = ExchangeNcclUniqueId(store, "job/1/", rank, kWorld, absl::Seconds(20));
  });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(ids[r].ok()) << "rank " << r << ": " << ids[r].status();
  auto stored = store.Get("job/1/nccl/unique_id", absl::ZeroDuration());
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), static_cast<size_t>(NCCL_UNIQUE_ID_BYTES));
  EXPECT_EQ(Bytes(*ids[0]), *stored);
  EXPECT_EQ(Bytes(*ids[1]), *stored);
  EXPECT_EQ(Bytes(*ids[2]), *stored);
  // A real id is not all zeros (8 random bytes, then the bootstrap address).
  EXPECT_NE(*stored, std::string(NCCL_UNIQUE_ID_BYTES, '\0'));
}

TEST(NcclUniqueIdTest, EachAttemptGetsAFreshId) {
  InMemoryKeyValueStore store;
  auto first = ExchangeNcclUniqueId(store, "job/1/", 0, 2, absl::Seconds(1));
  auto second = ExchangeNcclUniqueId(store, "job/2/", 0, 2, absl::Seconds(1));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(Bytes(*first), Bytes(*second));
}

TEST(NcclUniqueIdTest, ARankWhoseRankZeroNeverPublishesGetsDeadlineExceededNamingRankZero) {
  InMemoryKeyValueStore store;
  // The store's timeout is real time; 50 ms keeps the test fast on a path expected to fail.
  auto id = ExchangeNcclUniqueId(store, "job/7/", 2, 3, absl::Milliseconds(50));
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded) << id.status();
  EXPECT_EQ(id.status().message(),
            "rank 2 waited 50ms for rank 0's NCCL unique id (key job/7/nccl/unique_id): rank 0 "
            "never published it");
}

TEST(NcclUniqueIdTest, AValueOfTheWrongSizeIsRefused) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("p/nccl/unique_id", "short").ok());
  auto id = ExchangeNcclUniqueId(store, "p/", 1, 2, absl::Seconds(1));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("has 5 bytes, expected 128"));
}

TEST(NcclUniqueIdTest, RankOutOfRangeIsInvalidArgument) {
  InMemoryKeyValueStore store;
  EXPECT_EQ(ExchangeNcclUniqueId(store, "p/", 2, 2, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangeNcclUniqueId(store, "p/", -1, 2, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NcclUniqueIdTest, StoreErrorsKeepTheirCodeAndGainContext) {
  InMemoryKeyValueStore store;
  store.InjectError(absl::UnavailableError("coordinator unreachable"));
  auto publish = ExchangeNcclUniqueId(store, "p/", 0, 2, absl::Seconds(1));
  EXPECT_EQ(publish.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(publish.status().message()),
              HasSubstr("rank 0 could not publish the NCCL unique id"));
  auto read = ExchangeNcclUniqueId(store, "p/", 1, 2, absl::Seconds(1));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("coordinator unreachable"));
}

TEST(NcclUniqueIdTest, AFailingIdMakerIsReported) {
  InMemoryKeyValueStore store;
  auto id = ExchangeNcclUniqueId(store, "p/", 0, 2, absl::Seconds(1),
                                 [](ncclUniqueId*) { return ncclSystemError; });
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(store.Keys().empty());
}

TEST(NcclUniqueIdTest, WaitAllJoinedSucceedsOnceEveryRankJoined) {
  InMemoryKeyValueStore store;
  FakeClock clock;
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(PublishJoined(store, "p/", r).ok());
  EXPECT_TRUE(WaitAllJoined(store, "p/", 3, clock.Now(), clock).ok());
}

TEST(NcclUniqueIdTest, WaitAllJoinedNamesEveryRankThatNeverJoined) {
  InMemoryKeyValueStore store;
  FakeClock clock;
  ASSERT_TRUE(PublishJoined(store, "p/", 0).ok());
  ASSERT_TRUE(PublishJoined(store, "p/", 2).ok());
  // The deadline has already passed: every wait is a single check.
  const absl::Status s = WaitAllJoined(store, "p/", 5, clock.Now(), clock);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank(s) 1,3,4 never joined"));
}

TEST(NcclUniqueIdTest, RanksWithoutKeyListsTheMissingOnes) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(PublishStarted(store, "p/", 1).ok());
  EXPECT_THAT(RanksWithoutKey(store, 3, [](int r) { return NcclStartedKey("p/", r); }),
              ElementsAre(0, 2));
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
