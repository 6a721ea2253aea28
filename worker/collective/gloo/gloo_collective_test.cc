// Correctness of the gloo backend: N ranks as threads over real loopback TCP.
#include "worker/collective/gloo/gloo_collective.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"

namespace ringleader {
namespace {

using ::ringleader::testing_util::CreateGlooRanks;
using ::ringleader::testing_util::ForEachRankInParallel;
using ::ringleader::testing_util::Watchdog;
using ::testing::HasSubstr;

// Generous: a bug shows up as a timeout error well before the watchdog fires.
GlooOptions TestOptions() {
  GlooOptions opts;
  opts.rendezvous_timeout = absl::Seconds(20);
  opts.collective_timeout = absl::Seconds(20);
  return opts;
}

// Creates the ranks, failing the test on any error.
std::vector<std::unique_ptr<Collective>> MustCreate(int world_size,
                                                    const GlooOptions& opts = TestOptions()) {
  std::vector<std::unique_ptr<Collective>> out;
  for (auto& r : CreateGlooRanks(world_size, opts)) {
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(r.ok() ? std::move(*r) : nullptr);
  }
  return out;
}

// Integer-valued inputs (exact in float32 and summable without rounding), varied per rank.
float IntInput(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 101) - 50);
}
// Values that are not exactly summable in bf16.
float FractionalInput(int rank, size_t i) {
  return static_cast<float>((i * 37 + rank * 11) % 1000) * 0.173f - 60.0f + 0.01f * rank;
}

class GlooCollectiveSizeTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int world_size() const { return std::get<0>(GetParam()); }
  size_t element_count() const { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(
    WorldSizeAndCount, GlooCollectiveSizeTest,
    ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values(size_t{0}, size_t{1},
                                                                    size_t{1000}, size_t{1} << 20)),
    [](const ::testing::TestParamInfo<std::tuple<int, size_t>>& info) {
      return absl::StrCat("n", std::get<0>(info.param), "_count", std::get<1>(info.param));
    });

TEST_P(GlooCollectiveSizeTest, AllReduceFloatSumAvgMaxMatchReference) {
  Watchdog watchdog(absl::Seconds(60), "float all-reduce");
  const int n = world_size();
  const size_t count = element_count();
  std::vector<float> sum(count, 0.0f), max(count, -1e30f);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      sum[i] += IntInput(r, i);
      max[i] = std::max(max[i], IntInput(r, i));
    }
  }
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<float> bs(count), ba(count), bm(count);
    for (size_t i = 0; i < count; ++i) bs[i] = ba[i] = bm[i] = IntInput(r, i);
    auto ws = ranks[r]->AllReduce({bs.data(), count, DataType::kFloat32}, ReduceOp::kSum);
    auto wa = ranks[r]->AllReduce({ba.data(), count, DataType::kFloat32}, ReduceOp::kAvg);
    auto wm = ranks[r]->AllReduce({bm.data(), count, DataType::kFloat32}, ReduceOp::kMax);
    ASSERT_TRUE(ws->Wait().ok()) << ws->Wait();
    ASSERT_TRUE(wa->Wait().ok()) << wa->Wait();
    ASSERT_TRUE(wm->Wait().ok()) << wm->Wait();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(bs[i], sum[i]) << "rank " << r << " sum at " << i;
      ASSERT_EQ(ba[i], sum[i] / static_cast<float>(n)) << "rank " << r << " avg at " << i;
      ASSERT_EQ(bm[i], max[i]) << "rank " << r << " max at " << i;
    }
  });
}

TEST_P(GlooCollectiveSizeTest, AllReduceBf16WithinRoundingAndIdenticalOnAllRanks) {
  Watchdog watchdog(absl::Seconds(60), "bf16 all-reduce");
  const int n = world_size();
  const size_t count = element_count();
  // Reference in double from the bf16-rounded inputs.
  std::vector<double> sum(count, 0.0), abs_sum(count, 0.0), max(count, -1e30);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const double v = Bf16ToFloat(FloatToBf16(FractionalInput(r, i)));
      sum[i] += v;
      abs_sum[i] += std::fabs(v);
      max[i] = std::max(max[i], v);
    }
  }
  std::vector<std::vector<uint16_t>> sums(n), avgs(n);
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<uint16_t> bm(count);
    sums[r].resize(count);
    avgs[r].resize(count);
    for (size_t i = 0; i < count; ++i) {
      sums[r][i] = avgs[r][i] = bm[i] = FloatToBf16(FractionalInput(r, i));
    }
    auto ws = ranks[r]->AllReduce({sums[r].data(), count, DataType::kBFloat16}, ReduceOp::kSum);
    auto wa = ranks[r]->AllReduce({avgs[r].data(), count, DataType::kBFloat16}, ReduceOp::kAvg);
    auto wm = ranks[r]->AllReduce({bm.data(), count, DataType::kBFloat16}, ReduceOp::kMax);
    ASSERT_TRUE(ws->Wait().ok()) << ws->Wait();
    ASSERT_TRUE(wa->Wait().ok()) << wa->Wait();
    ASSERT_TRUE(wm->Wait().ok()) << wm->Wait();
    for (size_t i = 0; i < count; ++i) {
      // n-1 pairwise roundings (unit roundoff 2^-8 each, of partial sums <= abs_sum) + the final one.
      const double tol = n * std::ldexp(1.0, -8) * abs_sum[i] + 1e-30;
      ASSERT_NEAR(Bf16ToFloat(sums[r][i]), sum[i], tol) << "rank " << r << " sum at " << i;
      ASSERT_NEAR(Bf16ToFloat(avgs[r][i]), sum[i] / n, tol / n + std::ldexp(1.0, -8) * abs_sum[i] / n)
          << "rank " << r << " avg at " << i;
      ASSERT_EQ(Bf16ToFloat(bm[i]), max[i]) << "rank " << r << " max at " << i;  // max is exact
    }
  });
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(sums[r], sums[0]) << "ranks 0 and " << r << " disagree on the bf16 sum";
    EXPECT_EQ(avgs[r], avgs[0]) << "ranks 0 and " << r << " disagree on the bf16 avg";
  }
}

TEST_P(GlooCollectiveSizeTest, AllReduceUint8SumWrapsAndMaxMatchReference) {
  Watchdog watchdog(absl::Seconds(60), "uint8 all-reduce");
  const int n = world_size();
  const size_t count = element_count();
  auto input = [](int r, size_t i) { return static_cast<uint8_t>((i * 31 + r * 97) % 256); };
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<uint8_t> bs(count), bm(count);
    for (size_t i = 0; i < count; ++i) bs[i] = bm[i] = input(r, i);
    auto ws = ranks[r]->AllReduce({bs.data(), count, DataType::kUInt8}, ReduceOp::kSum);
    auto wm = ranks[r]->AllReduce({bm.data(), count, DataType::kUInt8}, ReduceOp::kMax);
    ASSERT_TRUE(ws->Wait().ok()) << ws->Wait();
    ASSERT_TRUE(wm->Wait().ok()) << wm->Wait();
    for (size_t i = 0; i < count; ++i) {
      unsigned s = 0;
      uint8_t m = 0;
      for (int q = 0; q < n; ++q) {
        s += input(q, i);
        m = std::max(m, input(q, i));
      }
      ASSERT_EQ(bs[i], static_cast<uint8_t>(s % 256)) << "rank " << r << " at " << i;
      ASSERT_EQ(bm[i], m) << "rank " << r << " at " << i;
    }
  });
}

TEST_P(GlooCollectiveSizeTest, BroadcastFromEveryRoot) {
  Watchdog watchdog(absl::Seconds(60), "broadcast");
  const int n = world_size();
  const size_t count = element_count();
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    for (int root = 0; root < n; ++root) {
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = IntInput(r, i) + 1000.0f * r;
      auto w = ranks[r]->Broadcast({buf.data(), count, DataType::kFloat32}, root);
      ASSERT_TRUE(w->Wait().ok()) << w->Wait();
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(buf[i], IntInput(root, i) + 1000.0f * root)
            << "rank " << r << " root " << root << " at " << i;
      }
    }
  });
}

TEST_P(GlooCollectiveSizeTest, AllGatherPlacesEachRankAtItsOffset) {
  Watchdog watchdog(absl::Seconds(60), "all-gather");
  const int n = world_size();
  const size_t count = element_count();
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<uint16_t> in(count), out(count * n, 0xffff);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<uint16_t>(r * 4099 + i);
    auto w = ranks[r]->AllGather({in.data(), count, DataType::kBFloat16},
                                 {out.data(), count * n, DataType::kBFloat16});
    ASSERT_TRUE(w->Wait().ok()) << w->Wait();
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[q * count + i], static_cast<uint16_t>(q * 4099 + i))
            << "rank " << r << " slot of rank " << q << " at " << i;
      }
    }
  });
}

TEST_P(GlooCollectiveSizeTest, ReduceScatterGivesEachRankItsReducedSlice) {
  Watchdog watchdog(absl::Seconds(60), "reduce-scatter");
  const int n = world_size();
  const size_t count = element_count();  // per-rank output elements
  auto ranks = MustCreate(n);
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<float> in(count * n), in_copy, sum_out(count), avg_out(count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = IntInput(r, i);
    in_copy = in;
    auto ws = ranks[r]->ReduceScatter({in.data(), in.size(), DataType::kFloat32},
                                      {sum_out.data(), count, DataType::kFloat32}, ReduceOp::kSum);
    auto wa = ranks[r]->ReduceScatter({in.data(), in.size(), DataType::kFloat32},
                                      {avg_out.data(), count, DataType::kFloat32}, ReduceOp::kAvg);
    ASSERT_TRUE(ws->Wait().ok()) << ws->Wait();
    ASSERT_TRUE(wa->Wait().ok()) << wa->Wait();
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int q = 0; q < n; ++q) expected += IntInput(q, r * count + i);
      ASSERT_EQ(sum_out[i], expected) << "rank " << r << " at " << i;
      ASSERT_EQ(avg_out[i], expected / static_cast<float>(n)) << "rank " << r << " at " << i;
    }
    EXPECT_EQ(in, in_copy) << "reduce-scatter must not modify its input";
  });
}

class GlooCollectiveWorldTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(WorldSize, GlooCollectiveWorldTest, ::testing::Values(2, 3, 4));

TEST_P(GlooCollectiveWorldTest, BarrierReleasesNoRankBeforeAllArrived) {
  Watchdog watchdog(absl::Seconds(60), "barrier");
  const int n = GetParam();
  auto ranks = MustCreate(n);
  std::atomic<int> arrived{0};
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    for (int round = 1; round <= 3; ++round) {
      arrived.fetch_add(1);
      auto w = ranks[r]->Barrier();
      ASSERT_TRUE(w->Wait().ok()) << w->Wait();
      EXPECT_GE(arrived.load(), round * n) << "rank " << r << " left barrier " << round << " early";
      // Second barrier keeps a fast rank from starting the next round's increment too early.
      auto w2 = ranks[r]->Barrier();
      ASSERT_TRUE(w2->Wait().ok()) << w2->Wait();
    }
  });
}

TEST_P(GlooCollectiveWorldTest, ManyAsyncOperationsInFlightCompleteCorrectly) {
  Watchdog watchdog(absl::Seconds(60), "async operations");
  const int n = GetParam();
  GlooOptions opts = TestOptions();
  opts.comm_threads = 4;
  auto ranks = MustCreate(n, opts);
  const std::vector<size_t> sizes = {100000, 1, 250000, 3, 70000, 0, 123457, 4096, 200000, 17};
  ForEachRankInParallel(n, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<std::vector<float>> bufs(sizes.size());
    std::vector<float> bcast(5000);
    for (size_t i = 0; i < bcast.size(); ++i) bcast[i] = IntInput(r, i);
    std::vector<std::shared_ptr<Work>> works;
    for (size_t b = 0; b < sizes.size(); ++b) {
      bufs[b].resize(sizes[b]);
      for (size_t i = 0; i < sizes[b]; ++i) bufs[b][i] = IntInput(r, i + b);
      CollectiveOptions o;
      o.bucket = static_cast<int>(b);
      works.push_back(ranks[r]->AllReduce({bufs[b].data(), sizes[b], DataType::kFloat32},
                                          ReduceOp::kSum, o));
      if (b == 4) {  // a different op kind in the middle of the stream
        works.push_back(ranks[r]->Broadcast({bcast.data(), bcast.size(), DataType::kFloat32}, 1));
      }
    }
    // Wait in reverse issue order: completion must not depend on the waiting order.
    for (auto it = works.rbegin(); it != works.rend(); ++it) {
      ASSERT_TRUE((*it)->Wait().ok()) << (*it)->Wait();
      EXPECT_TRUE((*it)->IsDone());
    }
    for (size_t b = 0; b < sizes.size(); ++b) {
      for (size_t i = 0; i < sizes[b]; ++i) {
        float expected = 0;
        for (int q = 0; q < n; ++q) expected += IntInput(q, i + b);
        ASSERT_EQ(bufs[b][i], expected) << "rank " << r << " bucket " << b << " at " << i;
      }
    }
    for (size_t i = 0; i < bcast.size(); ++i) ASSERT_EQ(bcast[i], IntInput(1, i));
  });
}

TEST(GlooCollectiveTest, SingleRankWorldIsTheIdentity) {
  Watchdog watchdog(absl::Seconds(30), "world of one");
  auto ranks = MustCreate(1);
  ASSERT_NE(ranks[0], nullptr);
  std::vector<float> buf = {1.5f, -2.0f, 3.25f};
  auto w = ranks[0]->AllReduce({buf.data(), buf.size(), DataType::kFloat32}, ReduceOp::kAvg);
  ASSERT_TRUE(w->Wait().ok()) << w->Wait();
  EXPECT_EQ(buf, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(ranks[0]->backend_name(), "gloo");
  EXPECT_EQ(ranks[0]->memory_kind(), MemoryKind::kHost);
  EXPECT_EQ(ranks[0]->world_size(), 1);
}

TEST(GlooCollectiveTest, ReportsRankWorldSizeAndMeasuresDuration) {
  Watchdog watchdog(absl::Seconds(30), "duration");
  auto ranks = MustCreate(2);
  ForEachRankInParallel(2, [&](int r) {
    if (ranks[r] == nullptr) return;
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->world_size(), 2);
    std::vector<float> buf(1 << 18, 1.0f);
    auto w = ranks[r]->AllReduce({buf.data(), buf.size(), DataType::kFloat32}, ReduceOp::kSum);
    ASSERT_TRUE(w->Wait().ok()) << w->Wait();
    EXPECT_GT(w->Duration(), absl::ZeroDuration());
  });
}

TEST(GlooCollectiveTest, BadArgumentsFailWithInvalidArgumentAndKeepTheCollectiveAlive) {
  Watchdog watchdog(absl::Seconds(30), "bad arguments");
  auto ranks = MustCreate(2);
  ForEachRankInParallel(2, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<uint8_t> u8(10);
    std::vector<float> f(10), small(15);
    absl::Status s =
        ranks[r]->AllReduce({u8.data(), u8.size(), DataType::kUInt8}, ReduceOp::kAvg)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("avg"));
    s = ranks[r]->Broadcast({f.data(), f.size(), DataType::kFloat32}, 2)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("root 2"));
    s = ranks[r]
            ->AllGather({f.data(), f.size(), DataType::kFloat32},
                        {small.data(), small.size(), DataType::kFloat32})
            ->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    s = ranks[r]->AllReduce({nullptr, 3, DataType::kFloat32}, ReduceOp::kSum)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    CollectiveOptions negative;
    negative.timeout = absl::Seconds(-1);
    s = ranks[r]->Barrier(negative)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    // Still alive: a valid operation succeeds on both ranks.
    f.assign(10, 1.0f);
    s = ranks[r]->AllReduce({f.data(), f.size(), DataType::kFloat32}, ReduceOp::kSum)->Wait();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(f[0], 2.0f);
  });
}

TEST(GlooCollectiveTest, CreateRejectsBadArgumentsNamingTheField) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  GlooOptions opts;
  auto r = CreateGlooCollective(store, "p/", 2, 2, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("rank 2"));
  r = CreateGlooCollective(store, "", 0, 2, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("key_prefix"));
  opts.comm_threads = 0;
  r = CreateGlooCollective(store, "p/", 0, 2, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("comm_threads"));
  opts = GlooOptions();
  opts.collective_timeout = absl::ZeroDuration();
  r = CreateGlooCollective(store, "p/", 0, 2, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("collective_timeout"));
  EXPECT_TRUE(store->Keys().empty()) << "validation must happen before touching the store";
}

TEST(GlooCollectiveTest, AbortOnHealthyCollectiveFailsLaterOperationsWithAborted) {
  Watchdog watchdog(absl::Seconds(30), "abort idle");
  auto ranks = MustCreate(2);
  ForEachRankInParallel(2, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<float> f(8, 1.0f);
    ASSERT_TRUE(
        ranks[r]->AllReduce({f.data(), f.size(), DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());
    ranks[r]->Abort(absl::CancelledError("job cancelled by user"));
    ranks[r]->Abort(absl::InternalError("second abort is ignored"));
    absl::Status s = ranks[r]->Barrier()->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr("job cancelled by user"));
    EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("second abort")));
  });
}

TEST(GlooCollectiveTest, CloseWaitsForEveryRankThenRefusesLaterOperations) {
  Watchdog watchdog(absl::Seconds(30), "close");
  auto ranks = MustCreate(3);
  ForEachRankInParallel(3, [&](int r) {
    if (ranks[r] == nullptr) return;
    std::vector<float> f(8, 1.0f);
    ASSERT_TRUE(
        ranks[r]->AllReduce({f.data(), f.size(), DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());
    ASSERT_TRUE(ranks[r]->Close(absl::Seconds(10)).ok());
    absl::Status after = ranks[r]->Barrier()->Wait();
    EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition) << after;
    EXPECT_THAT(std::string(after.message()), HasSubstr("closed"));
  });
}

TEST(GlooCollectiveTest, CloseWithAPeerThatNeverClosesFailsAtItsTimeout) {
  Watchdog watchdog(absl::Seconds(30), "close alone");
  GlooOptions opts = TestOptions();
  auto ranks = MustCreate(2, opts);
  ASSERT_NE(ranks[0], nullptr);
  // Rank 1 never closes: rank 0's closing barrier times out, and rank 0 is dead afterwards.
  const absl::Status closed = ranks[0]->Close(absl::Milliseconds(300));
  EXPECT_EQ(closed.code(), absl::StatusCode::kDeadlineExceeded) << closed;
  EXPECT_EQ(ranks[0]->Barrier()->Wait().code(), closed.code());
}

}  // namespace
}  // namespace ringleader
