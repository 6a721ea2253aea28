// A real gloo rendezvous (4 ranks as threads, loopback TCP) through the rank process's store
// stack: KvGlooStore over CoordinatorKeyValueStore over a mock CoordinatorClient per rank, whose
// KvSet/KvGetMany answer from one in-memory board. Each rank makes a constant number of calls
// (two KvSets, at most two KvGetManys, no KvGet), however large the world.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/key_value_store.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/coordinator_client/mock_coordinator_client.h"

namespace ringleader {
namespace {

using ::ringleader::testing_util::ForEachRankInParallel;
using ::ringleader::testing_util::Watchdog;
using ::testing::_;
using ::testing::Invoke;

// The coordinator's key-value store, as far as a rendezvous sees it: KvGetMany waits (real
// time, up to wait_timeout_ms) until every key exists and cuts the parts asked for.
class KvBoard {
 public:
  absl::StatusOr<v1::KvSetResponse> Set(const v1::KvSetRequest& request) {
    absl::MutexLock lock(&mu_);
    values_[request.key()] = request.value();
    return v1::KvSetResponse();
  }
  absl::StatusOr<v1::KvGetManyResponse> GetMany(const v1::KvGetManyRequest& request) {
    absl::MutexLock lock(&mu_);
    auto all_set = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const std::string& key : request.keys()) {
        if (values_.count(key) == 0) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_set),
                              absl::Milliseconds(request.wait_timeout_ms()))) {
      return absl::DeadlineExceededError("a key was not set before the wait ran out");
    }
    v1::KvGetManyResponse response;
    for (int i = 0; i < request.keys_size(); ++i) {
      const std::string& value = values_.at(request.keys(i));
      response.add_values(
          request.parts() == 0 ? value : CutValue(value, request.parts(), request.part_index(i)));
    }
    return response;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

TEST(CoordinatorRendezvousTest, EachRankMakesConstantCallsAndTheMeshWorks) {
  Watchdog watchdog(absl::Seconds(90), "gloo rendezvous over the coordinator store");
  constexpr int kWorld = 4;
  KvBoard board;
  std::vector<std::unique_ptr<MockCoordinatorClient>> clients;
  std::vector<std::shared_ptr<CoordinatorKeyValueStore>> stores;
  for (int r = 0; r < kWorld; ++r) {
    auto client = std::make_unique<MockCoordinatorClient>();
    EXPECT_CALL(*client, KvSet(_)).Times(2).WillRepeatedly(Invoke(&board, &KvBoard::Set));
    // Rank 0 reads no other rank's hostname: only its address book.
    EXPECT_CALL(*client, KvGetMany(_))
        .Times(r == 0 ? 1 : 2)
        .WillRepeatedly(Invoke(&board, &KvBoard::GetMany));
    EXPECT_CALL(*client, KvGet(_)).Times(0);
    // One poll covers the whole rendezvous, so the count above does not depend on timing.
    stores.push_back(std::make_shared<CoordinatorKeyValueStore>(
        client.get(), "job-1", 1, CoordinatorKeyValueStoreOptions{absl::Seconds(60), nullptr}));
    clients.push_back(std::move(client));
  }
  std::vector<std::unique_ptr<Collective>> ranks(kWorld);
  ForEachRankInParallel(kWorld, [&](int r) {
    GlooOptions opts;
    opts.rendezvous_timeout = absl::Seconds(30);
    auto created = CreateGlooCollective(stores[r], "job-1/1/gloo/", r, kWorld, opts);
    ASSERT_TRUE(created.ok()) << created.status();
    ranks[r] = *std::move(created);
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_NE(ranks[r], nullptr) << "rank " << r;
  ForEachRankInParallel(kWorld, [&](int r) {
    std::vector<float> value = {static_cast<float>(r + 1)};
    auto work = ranks[r]->AllReduce({value.data(), 1, DataType::kFloat32}, ReduceOp::kSum);
    ASSERT_TRUE(work->Wait().ok()) << work->Wait();
    EXPECT_EQ(value[0], 10.0f) << "rank " << r;
  });
}

}  // namespace
}  // namespace ringleader
