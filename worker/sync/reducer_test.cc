// The reducer over real gloo ranks (threads, loopback): results against a plain reference
// average across bucket layouts and world sizes, overlap on/off, accumulation, bf16, rebuild.
#include "worker/sync/reducer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;
using sync_test::TestGradient;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(24, 600, 7));
  return *params;
}

// Backward of rank `rank` at `step`: adds scale x the test gradient into each slot in `order`,
// marking each parameter ready right after.
void Backward(Reducer* reducer, int rank, int64_t step, const std::vector<size_t>& order,
              float scale = 1.0f) {
  auto slots = reducer->gradient_slots();
  for (size_t p : order) {
    for (size_t e = 0; e < Params()[p].count; ++e) {
      slots[p][e] += scale * TestGradient(rank, step, p, e);
    }
    reducer->MarkReady(p);
  }
}

// One full synced step (no accumulation).
absl::Status Step(Reducer* reducer, int rank, int64_t step, const std::vector<size_t>& order,
                  StepSyncStats* stats) {
  reducer->ZeroGradients();
  reducer->BeginMicroBatch(0);
  Backward(reducer, rank, step, order);
  return reducer->FinishStep(stats);
}

std::vector<std::vector<float>> Snapshot(Reducer* reducer) {
  std::vector<std::vector<float>> out;
  auto slots = reducer->gradient_slots();
  for (size_t p = 0; p < Params().size(); ++p) {
    out.emplace_back(slots[p], slots[p] + Params()[p].count);
  }
  return out;
}

// Every element equals the reference average over ranks (fp32 rounding tolerance).
void ExpectReferenceAverage(const std::vector<std::vector<float>>& got, int world, int64_t step,
                            const std::string& what) {
  int bad = 0;
  for (size_t p = 0; p < Params().size(); ++p) {
    for (size_t e = 0; e < Params()[p].count; ++e) {
      double sum = 0, sum_abs = 0;
      for (int r = 0; r < world; ++r) {
        sum += TestGradient(r, step, p, e);
        sum_abs += std::fabs(TestGradient(r, step, p, e));
      }
      const double ref = sum / world;
      if (std::fabs(got[p][e] - ref) > 1e-6 * sum_abs + 1e-30 && ++bad <= 5) {
        ADD_FAILURE() << what << ": param " << p << " element " << e << " got " << got[p][e]
                      << " want " << ref;
      }
    }
  }
}

ReducerOptions Caps(double first_mb, double cap_mb) {
  ReducerOptions o;
  o.first_bucket_mb = first_mb;
  o.bucket_cap_mb = cap_mb;
  o.timeout = absl::Seconds(10);
  return o;
}

TEST(ReducerTest, EqualsReferenceAverageAcrossLayoutsAndWorldSizes) {
  struct Config {
    const char* name;
    double first_mb, cap_mb;
    size_t min_buckets, max_buckets;
  };
  // ~7000 floats in 24 parameters: tiny caps force about one bucket per parameter.
  const std::vector<Config> configs = {{"tiny", 0.0002, 0.0005, 15, 24},
                                       {"medium", 0.002, 0.01, 2, 8},
                                       {"default", 1, 25, 1, 1}};
  for (int world = 1; world <= 4; ++world) {
    auto ranks = MakeGlooRanks(world);
    for (const Config& c : configs) {
      const std::string what = absl::StrCat("world ", world, " layout ", c.name);
      std::vector<std::vector<std::vector<float>>> results(world);
      std::vector<StepSyncStats> stats(world);
      RunRanks(world, [&](int r) {
        auto reducer = Reducer::Create(ranks[r].get(), Params(), Caps(c.first_mb, c.cap_mb));
        ASSERT_TRUE(reducer.ok()) << reducer.status();
        const auto order = ReverseRegistrationOrder(Params().size());
        for (int64_t step = 1; step <= 2; ++step) {
          absl::Status s = Step(reducer->get(), r, step, order, &stats[r]);
          ASSERT_TRUE(s.ok()) << what << " rank " << r << ": " << s;
        }
        results[r] = Snapshot(reducer->get());
      });
      for (int r = 0; r < world; ++r) {
        ExpectReferenceAverage(results[r], world, 2, absl::StrCat(what, " rank ", r));
        EXPECT_GE(stats[r].buckets, static_cast<int>(c.min_buckets)) << what;
        EXPECT_LE(stats[r].buckets, static_cast<int>(c.max_buckets)) << what;
        EXPECT_EQ(stats[r].step, 2);
        EXPECT_TRUE(stats[r].synced);
        EXPECT_TRUE(stats[r].ledger_checked);
        EXPECT_EQ(stats[r].collectives, stats[r].buckets);
        EXPECT_EQ(stats[r].collective_digest, stats[0].collective_digest) << what;
        // Reverse registration order = the layout's order: every bucket launched in backward.
        EXPECT_EQ(stats[r].buckets_launched_in_backward, stats[r].buckets) << what;
      }
    }
  }
}

TEST(ReducerTest, OverlapOnAndOffGiveBitIdenticalResults) {
  constexpr int kWorld = 3;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<std::vector<std::vector<float>>> on(kWorld), off(kWorld);
  std::vector<StepSyncStats> on_stats(kWorld), off_stats(kWorld);
  RunRanks(kWorld, [&](int r) {
    const auto order = ReverseRegistrationOrder(Params().size());
    for (bool overlap : {true, false}) {
      ReducerOptions o = Caps(0.001, 0.004);
      o.overlap = overlap;
      auto reducer = Reducer::Create(ranks[r].get(), Params(), o);
      ASSERT_TRUE(reducer.ok());
      StepSyncStats& st = overlap ? on_stats[r] : off_stats[r];
      ASSERT_TRUE(Step(reducer->get(), r, 1, order, &st).ok());
      (overlap ? on : off)[r] = Snapshot(reducer->get());
    }
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(on[r], off[r]) << "rank " << r;
    ExpectReferenceAverage(on[r], kWorld, 1, "overlap");
    EXPECT_GT(on_stats[r].buckets, 1);
    EXPECT_EQ(on_stats[r].buckets_launched_in_backward, on_stats[r].buckets);
    EXPECT_EQ(off_stats[r].buckets_launched_in_backward, 0);
    EXPECT_EQ(off_stats[r].hidden_comm_time, absl::ZeroDuration());
    EXPECT_EQ(on_stats[r].collective_digest, off_stats[r].collective_digest);
  }
}

// K micro-batches with loss_scale 1/K, synced once, equal one step on the K-times larger batch.
TEST(ReducerTest, GradientAccumulationEqualsOneLargeBatch) {
  constexpr int kWorld = 2, kK = 3, kBatch = 4;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<std::vector<std::vector<float>>> accumulated(kWorld), large(kWorld);
  std::vector<uint64_t> ledger_after_non_sync(kWorld), ledger_after_sync(kWorld);
  std::vector<int> buckets(kWorld);
  // The per-example gradient of example s (rank-local index) is TestGradient(rank, s, p, e); a
  // micro-batch's backward adds loss_scale x the mean over its examples.
  auto backward = [](Reducer* red, int r, int first, int count, float loss_scale) {
    auto slots = red->gradient_slots();
    for (size_t p : ReverseRegistrationOrder(Params().size())) {
      for (size_t e = 0; e < Params()[p].count; ++e) {
        double mean = 0;
        for (int s = first; s < first + count; ++s) mean += TestGradient(r, s, p, e);
        slots[p][e] += loss_scale * static_cast<float>(mean / count);
      }
      red->MarkReady(p);
    }
  };
  RunRanks(kWorld, [&](int r) {
    ReducerOptions o = Caps(0.001, 0.004);
    o.gradient_accumulation_steps = kK;
    auto acc = Reducer::Create(ranks[r].get(), Params(), o);
    ASSERT_TRUE(acc.ok());
    Reducer* red = acc->get();
    red->ZeroGradients();
    for (int k = 0; k < kK; ++k) {
      red->BeginMicroBatch(k);
      backward(red, r, k * kBatch, kBatch, 1.0f / kK);
      StepSyncStats st;
      ASSERT_TRUE(red->FinishStep(&st).ok());
      EXPECT_EQ(st.synced, k == kK - 1);
      if (k == kK - 2) ledger_after_non_sync[r] = red->ledger()->size();
      if (k == kK - 1) buckets[r] = st.buckets;
    }
    ledger_after_sync[r] = red->ledger()->size();
    accumulated[r] = Snapshot(red);

    ReducerOptions o1 = Caps(0.001, 0.004);
    auto one = Reducer::Create(ranks[r].get(), Params(), o1);
    ASSERT_TRUE(one.ok());
    (*one)->ZeroGradients();
    (*one)->BeginMicroBatch(0);
    backward(one->get(), r, 0, kK * kBatch, 1.0f);
    ASSERT_TRUE((*one)->FinishStep(nullptr).ok());
    large[r] = Snapshot(one->get());
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(ledger_after_non_sync[r], 0u) << "no collective before the sync micro-batch";
    EXPECT_EQ(ledger_after_sync[r], static_cast<uint64_t>(buckets[r]));
    for (size_t p = 0; p < Params().size(); ++p) {
      for (size_t e = 0; e < Params()[p].count; ++e) {
        // Float rounding relative to the summed terms (the mean itself may cancel to ~0).
        double terms = 0;
        for (int q = 0; q < kWorld; ++q) {
          for (int s = 0; s < kK * kBatch; ++s) terms += std::fabs(TestGradient(q, s, p, e));
        }
        terms /= kWorld * kK * kBatch;
        ASSERT_NEAR(accumulated[r][p][e], large[r][p][e], 1e-6 * terms)
            << "param " << p << " element " << e;
      }
    }
  }
}

// bf16 on the wire: each element within 2^-8 x (sum_r |g_r| + |avg|) of the fp32 average (one
// rounding of every input, of every partial sum and of the division, relative error 2^-8 each).
TEST(ReducerTest, Bf16StaysWithinTheDocumentedTolerance) {
  constexpr int kWorld = 4;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<std::vector<std::vector<float>>> fp32(kWorld), bf16(kWorld);
  std::vector<size_t> bytes32(kWorld), bytes16(kWorld);
  RunRanks(kWorld, [&](int r) {
    const auto order = ReverseRegistrationOrder(Params().size());
    for (DataType dt : {DataType::kFloat32, DataType::kBFloat16}) {
      ReducerOptions o = Caps(0.001, 0.004);
      o.comm_dtype = dt;
      auto reducer = Reducer::Create(ranks[r].get(), Params(), o);
      ASSERT_TRUE(reducer.ok());
      StepSyncStats st;
      ASSERT_TRUE(Step(reducer->get(), r, 1, order, &st).ok());
      (dt == DataType::kFloat32 ? fp32 : bf16)[r] = Snapshot(reducer->get());
      (dt == DataType::kFloat32 ? bytes32 : bytes16)[r] = st.bytes_communicated;
    }
  });
  double worst_ratio = 0, worst_rel_to_mean_abs = 0;
  size_t differing = 0, total = 0;
  for (size_t p = 0; p < Params().size(); ++p) {
    for (size_t e = 0; e < Params()[p].count; ++e) {
      double sum_abs = 0;
      for (int r = 0; r < kWorld; ++r) sum_abs += std::fabs(TestGradient(r, 1, p, e));
      const double avg = fp32[0][p][e];
      const double err = std::fabs(static_cast<double>(bf16[0][p][e]) - avg);
      const double tol = std::ldexp(1.0, -8) * (sum_abs + std::fabs(avg)) + 1e-6 * sum_abs;
      ASSERT_LE(err, tol) << "param " << p << " element " << e;
      worst_ratio = std::max(worst_ratio, err / tol);
      worst_rel_to_mean_abs = std::max(worst_rel_to_mean_abs, err / (sum_abs / kWorld));
      differing += err > 0;
      ++total;
      for (int r = 1; r < kWorld; ++r) ASSERT_EQ(bf16[r][p][e], bf16[0][p][e]);
    }
  }
  std::cout << "bf16 vs fp32: " << differing << "/" << total << " elements differ; worst error "
            << worst_ratio << " x tolerance; worst error / mean|g| = " << worst_rel_to_mean_abs
            << "\n";
  EXPECT_GT(differing, total / 2) << "bf16 must really be used on the wire";
  EXPECT_EQ(bytes16[0] * 2, bytes32[0]);
}

// Each rank produces gradients in its own order. After step 1 the buckets follow rank 0's order
// on every rank; results stay equal to the reference.
TEST(ReducerTest, RebuildBucketsFollowsRankZeroOrderOnEveryRank) {
  constexpr int kWorld = 3;
  auto ranks = MakeGlooRanks(kWorld);
  const size_t n = Params().size();
  std::vector<std::vector<size_t>> orders(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    orders[r] = ReverseRegistrationOrder(n);
    std::mt19937 rng(100 + r);
    std::shuffle(orders[r].begin(), orders[r].end(), rng);
  }
  std::vector<std::vector<size_t>> layouts(kWorld);
  std::vector<uint64_t> fingerprints(kWorld);
  std::vector<bool> changed(kWorld), changed_again(kWorld);
  std::vector<std::vector<std::vector<float>>> step1(kWorld), step1_old_slots(kWorld),
      step3(kWorld);
  std::vector<StepSyncStats> stats2(kWorld);
  RunRanks(kWorld, [&](int r) {
    ReducerOptions o = Caps(0.002, 0.006);
    o.rebuild_buckets = true;
    auto created = Reducer::Create(ranks[r].get(), Params(), o);
    ASSERT_TRUE(created.ok());
    Reducer* red = created->get();
    const auto old_slots = red->gradient_slots();
    StepSyncStats st;
    ASSERT_TRUE(Step(red, r, 1, orders[r], &st).ok());
    changed[r] = red->layout_changed();
    changed_again[r] = red->layout_changed();
    step1[r] = Snapshot(red);
    for (size_t p = 0; p < n; ++p) {
      step1_old_slots[r].emplace_back(old_slots[p], old_slots[p] + Params()[p].count);
    }
    layouts[r] = red->layout().ParameterOrder();
    fingerprints[r] = LayoutFingerprint(red->layout());
    ASSERT_TRUE(Step(red, r, 2, orders[r], &stats2[r]).ok());
    ASSERT_TRUE(Step(red, r, 3, orders[r], &st).ok());
    EXPECT_FALSE(red->layout_changed()) << "rebuild happens once";
    step3[r] = Snapshot(red);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(changed[r]);
    EXPECT_FALSE(changed_again[r]);
    EXPECT_EQ(layouts[r], orders[0]) << "rank " << r << " must use rank 0's ready order";
    EXPECT_EQ(fingerprints[r], fingerprints[0]);
    ExpectReferenceAverage(step1[r], kWorld, 1, "step 1 (new slots)");
    EXPECT_EQ(step1_old_slots[r], step1[r]) << "old slots keep the result until micro-batch 0";
    ExpectReferenceAverage(step3[r], kWorld, 3, "step 3");
  }
  // Rank 0's gradients now arrive in bucket order: every bucket launches during backward.
  EXPECT_EQ(stats2[0].buckets_launched_in_backward, stats2[0].buckets);
  EXPECT_GT(stats2[0].buckets, 1);
}

}  // namespace
}  // namespace ringleader
