#include "worker/collective/gloo/kv_gloo_store.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::ringleader::testing_util::ForEachRankInParallel;
using ::ringleader::testing_util::Watchdog;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(KvGlooStoreTest, SetAndGetUseThePrefix) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "job/2/gloo/", absl::Seconds(5));
  store.set("rank_0", Bytes(std::string("ad\0dr", 5)));
  EXPECT_THAT(backing->Keys(), ElementsAre("job/2/gloo/rank_0"));
  EXPECT_EQ(store.get("rank_0"), Bytes(std::string("ad\0dr", 5)));
  EXPECT_TRUE(store.first_error().ok());
}

TEST(KvGlooStoreTest, PrefixesIsolateAttempts) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore old_attempt(backing, "job/1/gloo/", absl::Seconds(5));
  KvGlooStore new_attempt(backing, "job/2/gloo/", absl::Milliseconds(20));
  old_attempt.set("0", Bytes("stale address"));
  EXPECT_THROW(new_attempt.get("0"), gloo::IoException);
}

TEST(KvGlooStoreTest, GetBlocksUntilTheKeyIsSet) {
  Watchdog watchdog(absl::Seconds(30), "blocking get");
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(20));
  absl::Notification started;
  std::vector<char> got;
  std::thread getter([&] {
    started.Notify();
    got = store.get("1");
  });
  started.WaitForNotification();
  ASSERT_TRUE(backing->Set("p/1", "peer").ok());
  getter.join();
  EXPECT_EQ(got, Bytes("peer"));
}

TEST(KvGlooStoreTest, WaitTimesOutWithIoExceptionAndKeepsTheStoreError) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(20));
  ASSERT_TRUE(backing->Set("p/0", "x").ok());
  try {
    store.wait({"0", "3"}, std::chrono::milliseconds(20));
    FAIL() << "wait on a missing key must throw";
  } catch (const gloo::IoException& e) {
    EXPECT_THAT(e.what(), HasSubstr("p/3"));
  }
  EXPECT_EQ(store.first_error().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(store.first_error().message(), HasSubstr("p/3"));
}

TEST(KvGlooStoreTest, WaitForExistingKeysReturns) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Milliseconds(20));
  ASSERT_TRUE(backing->Set("p/0", "x").ok());
  ASSERT_TRUE(backing->Set("p/1", "y").ok());
  EXPECT_NO_THROW(store.wait({"0", "1"}));
  EXPECT_NO_THROW(store.wait({"0", "1"}, std::chrono::milliseconds(0)));
}

TEST(KvGlooStoreTest, StoreErrorsMapToGlooExceptionKinds) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  KvGlooStore store(backing, "p/", absl::Seconds(1));
  backing->InjectError(absl::FailedPreconditionError("attempt is over"));
  EXPECT_THROW(store.set("0", Bytes("x")), gloo::IoException);
  EXPECT_EQ(store.first_error().code(), absl::StatusCode::kFailedPrecondition);

  KvGlooStore store2(backing, "p/", absl::Seconds(1));
  backing->InjectError(absl::InternalError("store bug"));
  EXPECT_THROW(store2.get("0"), gloo::EnforceNotMet);
  EXPECT_EQ(store2.first_error().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store2.first_error().message(), HasSubstr("store bug"));
}

// Counts what KvGlooStore asks of its store; answers from an in-memory store.
class CountingStore : public KeyValueStore {
 public:
  explicit CountingStore(std::shared_ptr<InMemoryKeyValueStore> backing)
      : backing_(std::move(backing)) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    ++sets;
    return backing_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    ++gets;
    return backing_->Get(key, timeout);
  }
  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   const ValueParts& parts,
                                                   absl::Duration timeout) override {
    ++get_manys;
    {
      absl::MutexLock lock(&mu_);
      last_parts_ = parts;
    }
    return GetEachKey(backing_.get(), keys, parts, timeout, Clock::Real());
  }
  ValueParts last_parts() {
    absl::MutexLock lock(&mu_);
    return last_parts_;
  }

  std::atomic<int> sets{0};
  std::atomic<int> gets{0};
  std::atomic<int> get_manys{0};

 private:
  const std::shared_ptr<InMemoryKeyValueStore> backing_;
  absl::Mutex mu_;
  ValueParts last_parts_ ABSL_GUARDED_BY(mu_);
};

// Rank j's blob as gloo writes it for a world of `n`: one 4-byte address per other rank.
std::string Blob(int j, int n) {
  std::string blob;
  for (int peer = 0; peer < n; ++peer) {
    if (peer != j) blob += absl::StrCat("a", j, peer, "z");
  }
  return blob;
}

// What gloo's extractAddress takes out of peer i's blob on rank r.
std::string Extract(const std::vector<char>& blob, int r, int i, int n) {
  const int adjusted = r > i ? r - 1 : r;
  const size_t size = blob.size() / static_cast<size_t>(n - 1);
  return std::string(blob.begin() + static_cast<long>(adjusted * size),
                     blob.begin() + static_cast<long>((adjusted + 1) * size));
}

// Rank 2 of 4 going through connectFullMesh's calls (gloo's order) while the others already
// published: two GetManys, no single Get, and gloo reads the right address of every blob.
TEST(KvGlooStoreBatchTest, ConnectFullMeshCallsOfOneRankMakeTwoGetManys) {
  constexpr int kRank = 2, kWorld = 4;
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  for (int j : {0, 1, 3}) {
    ASSERT_TRUE(backing->Set(absl::StrCat("p/rank_", j), absl::StrCat("host", j)).ok());
    ASSERT_TRUE(backing->Set(absl::StrCat("p/", j), Blob(j, kWorld)).ok());
  }
  auto counting = std::make_shared<CountingStore>(backing);
  KvGlooStore store(counting, "p/", absl::Seconds(5), nullptr, kRank, kWorld);

  store.set("rank_2", Bytes("host2"));
  EXPECT_EQ(store.get("rank_0"), Bytes("host0"));
  EXPECT_EQ(store.get("rank_1"), Bytes("host1"));
  store.set("2", Bytes(Blob(kRank, kWorld)));
  for (int i : {0, 1, 3}) {
    store.wait({std::to_string(i)}, std::chrono::milliseconds(5000));
    const std::vector<char> blob = store.get(std::to_string(i));
    EXPECT_EQ(blob.size(), Blob(i, kWorld).size());
    EXPECT_EQ(Extract(blob, kRank, i, kWorld), absl::StrCat("a", i, kRank, "z")) << "peer " << i;
  }
  EXPECT_EQ(counting->sets, 2);
  EXPECT_EQ(counting->gets, 0);
  EXPECT_EQ(counting->get_manys, 2);
  // Only this rank's address out of each blob: 3 parts, at 1 (in 0's and 1's), 2 (in 3's).
  EXPECT_EQ(counting->last_parts().count, 3u);
  EXPECT_THAT(counting->last_parts().index, ElementsAre(1u, 1u, 2u));
  EXPECT_TRUE(store.first_error().ok());
}

TEST(KvGlooStoreBatchTest, WholeValuesWhenTheOwnBlobDoesNotSplitIntoPeers) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  ASSERT_TRUE(backing->Set("p/1", "not three addresses").ok());
  ASSERT_TRUE(backing->Set("p/2", "peer two").ok());
  auto counting = std::make_shared<CountingStore>(backing);
  KvGlooStore store(counting, "p/", absl::Seconds(5), nullptr, 0, 3);
  store.set("0", Bytes("odd"));  // 3 bytes for 2 peers
  EXPECT_EQ(store.get("1"), Bytes("not three addresses"));
  EXPECT_EQ(store.get("2"), Bytes("peer two"));
  EXPECT_EQ(counting->get_manys, 1);
  EXPECT_EQ(counting->last_parts().count, 0u);
  EXPECT_EQ(counting->gets, 0);
}

TEST(KvGlooStoreBatchTest, OtherKeysArePassedOnKeyByKey) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  for (const char* key : {"p/rank_3", "p/7", "p/x", "p/02"}) {
    ASSERT_TRUE(backing->Set(key, key).ok());
  }
  auto counting = std::make_shared<CountingStore>(backing);
  KvGlooStore store(counting, "p/", absl::Seconds(5), nullptr, 2, 4);
  EXPECT_EQ(store.get("rank_3"), Bytes("p/rank_3"));  // not below this rank
  EXPECT_EQ(store.get("7"), Bytes("p/7"));            // not a rank of this world
  EXPECT_EQ(store.get("x"), Bytes("p/x"));
  EXPECT_EQ(store.get("02"), Bytes("p/02"));  // not how gloo writes rank 2
  store.wait({"x"});
  EXPECT_EQ(counting->gets, 5);
  EXPECT_EQ(counting->get_manys, 0);
}

TEST(KvGlooStoreBatchTest, BatchedWaitRunsOutNamingTheMissingPeer) {
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  ASSERT_TRUE(backing->Set("p/1", "ab").ok());
  KvGlooStore store(std::make_shared<CountingStore>(backing), "p/", absl::Seconds(20), nullptr,
                    0, 3);
  store.set("0", Bytes("xy"));
  try {
    store.wait({"1"}, std::chrono::milliseconds(20));
    FAIL() << "rank 2 never published: the wait must throw";
  } catch (const gloo::IoException& e) {
    EXPECT_THAT(e.what(), HasSubstr("p/2"));
  }
  EXPECT_EQ(store.first_error().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(store.first_error().message(), HasSubstr("p/2"));
}

// The real gloo rendezvous of 4 ranks (threads, loopback TCP), each through its own counting
// store: O(1) store calls per rank, and the mesh works.
TEST(KvGlooStoreBatchTest, GlooRendezvousMakesConstantCallsPerRank) {
  Watchdog watchdog(absl::Seconds(60), "batched gloo rendezvous");
  constexpr int kWorld = 4;
  auto backing = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::shared_ptr<CountingStore>> stores;
  for (int r = 0; r < kWorld; ++r) stores.push_back(std::make_shared<CountingStore>(backing));
  std::vector<std::unique_ptr<Collective>> ranks(kWorld);
  ForEachRankInParallel(kWorld, [&](int r) {
    GlooOptions opts;
    opts.rendezvous_timeout = absl::Seconds(20);
    auto created = CreateGlooCollective(stores[r], "job/1/gloo/", r, kWorld, opts);
    ASSERT_TRUE(created.ok()) << created.status();
    ranks[r] = *std::move(created);
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_NE(ranks[r], nullptr);
    EXPECT_EQ(stores[r]->sets, 2) << "rank " << r;
    EXPECT_EQ(stores[r]->gets, 0) << "rank " << r;
    EXPECT_EQ(stores[r]->get_manys, r == 0 ? 1 : 2) << "rank " << r;
  }
  ForEachRankInParallel(kWorld, [&](int r) {
    std::vector<float> value = {static_cast<float>(r + 1)};
    auto work = ranks[r]->AllReduce({value.data(), 1, DataType::kFloat32}, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    EXPECT_EQ(value[0], 10.0f) << "rank " << r;
  });
}

}  // namespace
}  // namespace ringleader
