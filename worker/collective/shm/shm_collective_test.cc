// Correctness of the shared-memory backend: N ranks as threads mapping one real POSIX segment,
// against references computed in the backend's reduction order (so equality is exact), against
// gloo bit for bit at 2 ranks, chunking with small slots, failures and the fall-back answer.
#include "worker/collective/shm/shm_collective.h"

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/bf16.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::ringleader::testing_util::CreateGlooRanks;
using ::ringleader::testing_util::ForEachRankInParallel;
using ::ringleader::testing_util::Watchdog;
using ::testing::HasSubstr;
using ::testing::Not;

CollectiveOptions Opts(absl::Duration timeout, int bucket) {
  CollectiveOptions o;
  o.timeout = timeout;
  o.bucket = bucket;
  return o;
}

// Unique to this process, so concurrent test runs (each maybe pid 2 in its own sandbox) never see
// each other's segments.
const std::string& ProcessTag() {
  static const std::string* tag = [] {
    absl::BitGen gen;
    return new std::string(absl::StrCat(absl::Uniform<uint32_t>(gen)));
  }();
  return *tag;
}
std::string Prefix() { return absl::StrCat("job-", ProcessTag(), "/1/"); }

ShmOptions TestOptions(size_t slot_bytes = size_t{8} << 10) {
  ShmOptions opts;
  opts.slot_bytes = slot_bytes;  // 8 KiB slots: 4 KiB chunks, so most tests cut into chunks
  opts.rendezvous_timeout = absl::Seconds(20);
  opts.collective_timeout = absl::Seconds(20);
  return opts;
}

// Rendezvouses `n` ranks (threads) through `store`; results in rank order.
std::vector<absl::StatusOr<ShmRendezvous>> Rendezvous(int n, const ShmOptions& opts,
                                                      std::shared_ptr<KeyValueStore> store,
                                                      const std::string& prefix = Prefix()) {
  std::vector<absl::StatusOr<ShmRendezvous>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(absl::UnknownError("not run"));
  ForEachRankInParallel(n, [&](int r) { out[r] = CreateShmCollective(store, prefix, r, n, opts); });
  return out;
}

std::vector<std::unique_ptr<Collective>> MustCreate(int n, const ShmOptions& opts = TestOptions()) {
  std::vector<std::unique_ptr<Collective>> ranks;
  for (auto& r : Rendezvous(n, opts, std::make_shared<InMemoryKeyValueStore>())) {
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r.ok() && r->collective != nullptr) << (r.ok() ? r->unavailable : "");
    ranks.push_back(r.ok() ? std::move(r->collective) : nullptr);
  }
  return ranks;
}

float Input(int rank, size_t i) {
  return static_cast<float>((i * 37 + rank * 11) % 1000) * 0.173f - 60.0f + 0.01f * rank;
}

// The segments this test process left in /dev/shm (rank 0 unlinks its name after the
// rendezvous, so none should remain).
int LeftoverSegments() {
  int found = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (absl::StrContains(e->d_name, absl::StrCat("ringleader-job-", ProcessTag(), "-1-"))) ++found;
    }
    closedir(dir);
  }
  return found;
}

class ShmSizeTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int n() const { return std::get<0>(GetParam()); }
  size_t count() const { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(
    WorldSizeAndCount, ShmSizeTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       // 1500 floats and more span several 4 KiB chunks.
                       ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{1500},
                                         size_t{10007})),
    [](const ::testing::TestParamInfo<std::tuple<int, size_t>>& info) {
      return absl::StrCat("n", std::get<0>(info.param), "_count", std::get<1>(info.param));
    });

TEST_P(ShmSizeTest, AllReduceSumAvgMaxEqualTheRankOrderReferenceExactly) {
  Watchdog watchdog(absl::Seconds(60), "shm all-reduce");
  std::vector<float> sum(count()), max(count());
  for (size_t i = 0; i < count(); ++i) {
    sum[i] = Input(0, i);
    max[i] = Input(0, i);
    for (int r = 1; r < n(); ++r) {
      sum[i] = sum[i] + Input(r, i);
      max[i] = std::max(max[i], Input(r, i));
    }
  }
  auto ranks = MustCreate(n());
  ForEachRankInParallel(n(), [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<float> bs(count()), ba(count()), bm(count());
    for (size_t i = 0; i < count(); ++i) bs[i] = ba[i] = bm[i] = Input(r, i);
    auto ws = ranks[r]->AllReduce({bs.data(), count(), DataType::kFloat32}, ReduceOp::kSum);
    auto wa = ranks[r]->AllReduce({ba.data(), count(), DataType::kFloat32}, ReduceOp::kAvg);
    auto wm = ranks[r]->AllReduce({bm.data(), count(), DataType::kFloat32}, ReduceOp::kMax);
    ASSERT_TRUE(ws->Wait().ok()) << ws->Wait();
    ASSERT_TRUE(wa->Wait().ok()) << wa->Wait();
    ASSERT_TRUE(wm->Wait().ok()) << wm->Wait();
    for (size_t i = 0; i < count(); ++i) {
      ASSERT_EQ(bs[i], sum[i]) << "rank " << r << " sum at " << i;
      ASSERT_EQ(ba[i], sum[i] / static_cast<float>(n())) << "rank " << r << " avg at " << i;
      ASSERT_EQ(bm[i], max[i]) << "rank " << r << " max at " << i;
    }
  });
}

TEST_P(ShmSizeTest, Bf16AndUint8ReduceLikeTheirPairwiseSteps) {
  Watchdog watchdog(absl::Seconds(60), "shm bf16/uint8");
  std::vector<uint16_t> bf(count());
  std::vector<uint8_t> u8(count());
  for (size_t i = 0; i < count(); ++i) {
    bf[i] = FloatToBf16(Input(0, i));
    u8[i] = static_cast<uint8_t>(i * 91);
    for (int r = 1; r < n(); ++r) {
      bf[i] = FloatToBf16(Bf16ToFloat(bf[i]) + Bf16ToFloat(FloatToBf16(Input(r, i))));
      u8[i] = static_cast<uint8_t>(u8[i] + static_cast<uint8_t>(i * 91 + r * 200));
    }
  }
  auto ranks = MustCreate(n());
  ForEachRankInParallel(n(), [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<uint16_t> b(count());
    std::vector<uint8_t> u(count());
    for (size_t i = 0; i < count(); ++i) {
      b[i] = FloatToBf16(Input(r, i));
      u[i] = static_cast<uint8_t>(i * 91 + (r == 0 ? 0 : r * 200));
    }
    ASSERT_TRUE(ranks[r]->AllReduce({b.data(), count(), DataType::kBFloat16}, ReduceOp::kSum)
                    ->Wait()
                    .ok());
    ASSERT_TRUE(
        ranks[r]->AllReduce({u.data(), count(), DataType::kUInt8}, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(b, bf) << "rank " << r;
    EXPECT_EQ(u, u8) << "rank " << r;
  });
}

TEST_P(ShmSizeTest, BroadcastAllGatherAndReduceScatterMoveTheRightElements) {
  Watchdog watchdog(absl::Seconds(60), "shm broadcast/all-gather/reduce-scatter");
  const int world = n();
  const size_t c = count();
  auto ranks = MustCreate(world);
  ForEachRankInParallel(world, [&](int r) {
    if (ranks[r] == nullptr) return;
    for (int root = 0; root < world; ++root) {
      std::vector<float> b(c);
      for (size_t i = 0; i < c; ++i) b[i] = Input(r, i);
      ASSERT_TRUE(ranks[r]->Broadcast({b.data(), c, DataType::kFloat32}, root)->Wait().ok());
      for (size_t i = 0; i < c; ++i) ASSERT_EQ(b[i], Input(root, i)) << "root " << root;
    }
    std::vector<float> in(c), gathered(c * world);
    for (size_t i = 0; i < c; ++i) in[i] = Input(r, i);
    ASSERT_TRUE(ranks[r]
                    ->AllGather({in.data(), c, DataType::kFloat32},
                                {gathered.data(), c * world, DataType::kFloat32})
                    ->Wait()
                    .ok());
    for (int q = 0; q < world; ++q) {
      for (size_t i = 0; i < c; ++i) ASSERT_EQ(gathered[q * c + i], Input(q, i));
    }
    // Reduce-scatter: slice s of rank q's input is Input(q, s * c + i).
    std::vector<float> all(c * world), mine(c);
    for (size_t i = 0; i < c * world; ++i) all[i] = Input(r, i);
    ASSERT_TRUE(ranks[r]
                    ->ReduceScatter({all.data(), c * world, DataType::kFloat32},
                                    {mine.data(), c, DataType::kFloat32}, ReduceOp::kSum)
                    ->Wait()
                    .ok());
    for (size_t i = 0; i < c; ++i) {
      float expected = Input(0, r * c + i);
      for (int q = 1; q < world; ++q) expected = expected + Input(q, r * c + i);
      ASSERT_EQ(mine[i], expected) << "rank " << r << " element " << i;
    }
  });
}

TEST(ShmCollectiveTest, TwoRanksAverageBitForBitLikeGloo) {
  Watchdog watchdog(absl::Seconds(60), "shm vs gloo");
  const size_t count = 300000;  // about 1.2 MB: a real bucket, many 4 MiB-slot chunks not needed
  auto shm = MustCreate(2, TestOptions(size_t{64} << 10));
  GlooOptions gloo_opts;
  gloo_opts.rendezvous_timeout = absl::Seconds(20);
  gloo_opts.collective_timeout = absl::Seconds(20);
  auto gloo = CreateGlooRanks(2, gloo_opts);
  ASSERT_TRUE(gloo[0].ok() && gloo[1].ok());
  std::vector<std::vector<float>> by_shm(2), by_gloo(2);
  ForEachRankInParallel(2, [&](int r) {
    by_shm[r].resize(count);
    for (size_t i = 0; i < count; ++i) by_shm[r][i] = Input(r, i) * 1e-3f + 1.0f / (i + 3);
    by_gloo[r] = by_shm[r];
    ASSERT_TRUE(
        shm[r]->AllReduce({by_shm[r].data(), count, DataType::kFloat32}, ReduceOp::kAvg)->Wait().ok());
    ASSERT_TRUE((*gloo[r])
                    ->AllReduce({by_gloo[r].data(), count, DataType::kFloat32}, ReduceOp::kAvg)
                    ->Wait()
                    .ok());
  });
  EXPECT_EQ(by_shm[0], by_gloo[0]);
  EXPECT_EQ(by_shm[1], by_gloo[1]);
  EXPECT_EQ(by_shm[0], by_shm[1]);
}

TEST(ShmCollectiveTest, ManyAsyncOperationsRunInIssueOrder) {
  Watchdog watchdog(absl::Seconds(60), "shm async");
  const int n = 3;
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    std::vector<std::vector<float>> bufs(20, std::vector<float>(1000));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (size_t i = 0; i < 1000; ++i) bufs[k][i] = static_cast<float>(k * 1000 + i + r);
      works.push_back(ranks[r]->AllReduce({bufs[k].data(), 1000, DataType::kFloat32},
                                          ReduceOp::kSum, Opts(absl::ZeroDuration(), static_cast<int>(k))));
    }
    for (size_t k = 0; k < bufs.size(); ++k) {
      ASSERT_TRUE(works[k]->Wait().ok()) << works[k]->Wait();
      for (size_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(bufs[k][i], static_cast<float>(3 * (k * 1000 + i) + 0 + 1 + 2));
      }
    }
  });
}

TEST(ShmCollectiveTest, BarrierReleasesNoRankBeforeAllArrived) {
  Watchdog watchdog(absl::Seconds(60), "shm barrier");
  auto ranks = MustCreate(3);
  absl::Notification late_rank_may_go;
  std::atomic<int> released{0};
  ForEachRankInParallel(3, [&](int r) {
    if (r == 2) {
      late_rank_may_go.WaitForNotification();
      EXPECT_EQ(released.load(), 0) << "a rank passed the barrier before rank 2 arrived";
    }
    auto w = ranks[r]->Barrier();
    if (r == 0) late_rank_may_go.Notify();
    ASSERT_TRUE(w->Wait().ok());
    released.fetch_add(1);
  });
  EXPECT_EQ(released.load(), 3);
}

TEST(ShmCollectiveTest, ARankThatNeverIssuesIsNamedWhenTheOthersTimeOut) {
  Watchdog watchdog(absl::Seconds(60), "shm timeout");
  auto ranks = MustCreate(3);
  ForEachRankInParallel(2, [&](int r) {
    std::vector<float> b(10, 1.0f);
    auto w = ranks[r]->AllReduce({b.data(), 10, DataType::kFloat32}, ReduceOp::kSum,
                                 Opts(absl::Milliseconds(300), 4));
    const absl::Status s = w->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), HasSubstr("waiting for rank 2 "));
    EXPECT_THAT(s.message(), HasSubstr("bucket 4"));
    EXPECT_EQ(FailureOf(s).kind(), v1::RankFailure::PEER_TIMED_OUT);
    // The first error kills the collective.
    EXPECT_EQ(ranks[r]->Barrier()->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  });
}

TEST(ShmCollectiveTest, AnAbortOnOneRankEndsThePeersWaitsWithItsReason) {
  Watchdog watchdog(absl::Seconds(60), "shm abort");
  auto ranks = MustCreate(2);
  std::vector<float> b(10, 1.0f);
  // Rank 0 waits in a collective whose timeout is far away; rank 1 aborts instead of joining.
  auto w = ranks[0]->AllReduce({b.data(), 10, DataType::kFloat32}, ReduceOp::kSum,
                               Opts(absl::Seconds(50), -1));
  ranks[1]->Abort(absl::InternalError("NaN loss at step 7"));
  const absl::Status s = w->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("peer rank 1 aborted the collective"));
  EXPECT_THAT(s.message(), HasSubstr("NaN loss at step 7"));
  const v1::RankFailure failure = FailureOf(s);
  EXPECT_EQ(failure.kind(), v1::RankFailure::ABORTED_BY_PEER);
  EXPECT_TRUE(failure.has_peer());
  EXPECT_EQ(failure.peer_rank(), 1u);
  const absl::Status own = ranks[1]->Barrier()->Wait();
  EXPECT_EQ(own.code(), absl::StatusCode::kAborted) << own;
}

TEST(ShmCollectiveTest, DestroyingALiveRankReleasesItsPeers) {
  Watchdog watchdog(absl::Seconds(60), "shm destroy");
  auto ranks = MustCreate(2);
  auto w = ranks[0]->Barrier(Opts(absl::Seconds(50), -1));
  ranks[1].reset();
  const absl::Status s = w->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("destroyed"));
}

TEST(ShmCollectiveTest, CloseWaitsForEveryRankThenRefusesOperationsWithoutAbortingPeers) {
  Watchdog watchdog(absl::Seconds(60), "shm close");
  auto ranks = MustCreate(2);
  ForEachRankInParallel(2, [&](int r) {
    ASSERT_TRUE(ranks[r]->Close(absl::Seconds(20)).ok());
    EXPECT_EQ(ranks[r]->Barrier()->Wait().code(), absl::StatusCode::kFailedPrecondition);
  });
  ranks[0].reset();  // closed: destroying it must not look like an abort to the other rank
  EXPECT_EQ(ranks[1]->Barrier()->Wait().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShmCollectiveTest, BadArgumentsFailOnlyThatOperation) {
  auto ranks = MustCreate(1);
  std::vector<uint8_t> u(4);
  const absl::Status s =
      ranks[0]->AllReduce({u.data(), 4, DataType::kUInt8}, ReduceOp::kAvg)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("avg is not supported on uint8"));
  EXPECT_EQ(ranks[0]->Broadcast({u.data(), 4, DataType::kUInt8}, 3)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ranks[0]->Barrier()->Wait().ok());
}

TEST(ShmCollectiveTest, CreateRejectsBadArgumentsNamingTheField) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  EXPECT_THAT(CreateShmCollective(store, "", 0, 1).status().message(), HasSubstr("key_prefix"));
  EXPECT_THAT(CreateShmCollective(store, "p/", 2, 2).status().message(), HasSubstr("rank 2"));
  ShmOptions tiny;
  tiny.slot_bytes = 100;
  EXPECT_THAT(CreateShmCollective(store, "p/", 0, 1, tiny).status().message(),
              HasSubstr("ShmOptions.slot_bytes"));
}

// A store that shows every rank but 0 a segment name that does not exist here, as a rank on
// another host (or with another /dev/shm) would find.
class ElsewhereStore : public InMemoryKeyValueStore {
 public:
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    absl::StatusOr<std::string> v = InMemoryKeyValueStore::Get(key, timeout);
    if (v.ok() && absl::EndsWith(key, "shm/segment")) {
      return absl::StrCat("/ringleader-nowhere", v->substr(v->find(' ')));
    }
    return v;
  }
};

TEST(ShmCollectiveTest, WhenOneRankCannotMapTheSegmentEveryRankGetsNoneAndTheReason) {
  Watchdog watchdog(absl::Seconds(60), "shm fallback");
  auto results = Rendezvous(3, TestOptions(), std::make_shared<ElsewhereStore>());
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(results[r]->collective, nullptr) << "rank " << r;
    EXPECT_THAT(results[r]->unavailable, HasSubstr("rank 1: shm_open /ringleader-nowhere"));
    EXPECT_THAT(results[r]->unavailable, HasSubstr("rank 2: "));
    EXPECT_THAT(results[r]->unavailable, Not(HasSubstr("rank 0")));
  }
  EXPECT_EQ(LeftoverSegments(), 0);
}

TEST(ShmCollectiveTest, NoSegmentIsLeftInDevShmAfterTheRendezvous) {
  auto ranks = MustCreate(2);
  EXPECT_EQ(LeftoverSegments(), 0);
  ASSERT_TRUE(ranks[0] != nullptr && ranks[1] != nullptr);
  EXPECT_EQ(ranks[0]->backend_name(), "shm");
}

}  // namespace
}  // namespace ringleader
