// The reducer's failure-safety over real gloo ranks: unused parameters (with and without
// find_unused_parameters) and a collective desync, each on ONE rank only. Every rank must get
// the error, and none may hang (collective timeout 10 s, watchdog 25 s: a hang shows up as
// DEADLINE_EXCEEDED or a watchdog abort, never as the expected FAILED_PRECONDITION).
#include <cmath>
#include <algorithm>
#include <iostream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/reducer.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;
using sync_test::TestGradient;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(12, 300, 3));
  return *params;
}

ReducerOptions Options() {
  ReducerOptions o;
  o.first_bucket_mb = 0.001;
  o.bucket_cap_mb = 0.003;
  o.timeout = absl::Seconds(10);
  return o;
}

// Backward that skips the parameters in `skip` (no gradient, no MarkReady).
void Backward(Reducer* reducer, int rank, int64_t step, const std::set<size_t>& skip) {
  auto slots = reducer->gradient_slots();
  for (size_t p : ReverseRegistrationOrder(Params().size())) {
    if (skip.count(p)) continue;
    for (size_t e = 0; e < Params()[p].count; ++e) slots[p][e] += TestGradient(rank, step, p, e);
    reducer->MarkReady(p);
  }
}

TEST(ReducerUnusedTest, FindUnusedReducesZerosAndStillReducesEveryBucket) {
  constexpr int kWorld = 3;
  constexpr size_t kUnused = 5;  // unused on rank 1 only
  constexpr size_t kUnusedEverywhere = 0;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<std::vector<float>> unused_result(kWorld), everywhere_result(kWorld),
      used_result(kWorld);
  std::vector<StepSyncStats> stats(kWorld);
  RunRanks(kWorld, [&](int r) {
    ReducerOptions o = Options();
    o.find_unused_parameters = true;
    auto created = Reducer::Create(ranks[r].get(), Params(), o);
    ASSERT_TRUE(created.ok());
    Reducer* red = created->get();
    red->ZeroGradients();
    auto slots = red->gradient_slots();
    // Stale values in slots that get no gradient must not leak into the average.
    if (r == 1) std::fill_n(slots[kUnused], Params()[kUnused].count, 1234.0f);
    std::fill_n(slots[kUnusedEverywhere], Params()[kUnusedEverywhere].count, -99.0f);
    red->BeginMicroBatch(0);
    std::set<size_t> skip = {kUnusedEverywhere};
    if (r == 1) skip.insert(kUnused);
    Backward(red, r, 1, skip);
    absl::Status s = red->FinishStep(&stats[r]);
    ASSERT_TRUE(s.ok()) << s;
    unused_result[r].assign(slots[kUnused], slots[kUnused] + Params()[kUnused].count);
    everywhere_result[r].assign(slots[kUnusedEverywhere],
                                slots[kUnusedEverywhere] + Params()[kUnusedEverywhere].count);
    used_result[r].assign(slots[1], slots[1] + Params()[1].count);
  });
  for (int r = 0; r < kWorld; ++r) {
    for (size_t e = 0; e < Params()[kUnused].count; ++e) {
      // Rank 1 contributed zeros: the average of ranks 0 and 2's gradients over 3 ranks.
      const double want = (TestGradient(0, 1, kUnused, e) + TestGradient(2, 1, kUnused, e)) / 3.0;
      ASSERT_NEAR(unused_result[r][e], want, 1e-6 * std::fabs(want) + 1e-9) << "element " << e;
    }
    for (float v : everywhere_result[r]) ASSERT_EQ(v, 0.0f);
    for (size_t e = 0; e < Params()[1].count; ++e) {
      double want = 0;
      for (int q = 0; q < kWorld; ++q) want += TestGradient(q, 1, 1, e) / 3.0;
      ASSERT_NEAR(used_result[r][e], want, 1e-6 * std::fabs(want) + 1e-9);
    }
    std::vector<std::string> expected = {Params()[kUnusedEverywhere].name};
    if (r == 1) expected.push_back(Params()[kUnused].name);
    std::vector<std::string> got = stats[r].unused_parameters;
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(got, expected) << "rank " << r;
    EXPECT_EQ(stats[r].buckets, stats[0].buckets);
    EXPECT_EQ(stats[r].collective_digest, stats[0].collective_digest);
  }
}

// Parameter 2 is used only in micro-batch 0 of 2 on every rank: with find_unused it keeps what
// micro-batch 0 accumulated (it is not zero-filled).
TEST(ReducerUnusedTest, FindUnusedKeepsGradientsFromEarlierMicroBatches) {
  constexpr int kWorld = 2;
  constexpr size_t kEarlyOnly = 2;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<std::vector<float>> result(kWorld);
  RunRanks(kWorld, [&](int r) {
    ReducerOptions o = Options();
    o.find_unused_parameters = true;
    o.gradient_accumulation_steps = 2;
    auto created = Reducer::Create(ranks[r].get(), Params(), o);
    ASSERT_TRUE(created.ok());
    Reducer* red = created->get();
    red->ZeroGradients();
    red->BeginMicroBatch(0);
    Backward(red, r, 1, {});
    red->BeginMicroBatch(1);
    Backward(red, r, 2, {kEarlyOnly});
    ASSERT_TRUE(red->FinishStep(nullptr).ok());
    auto slot = red->gradient_slots()[kEarlyOnly];
    result[r].assign(slot, slot + Params()[kEarlyOnly].count);
  });
  for (int r = 0; r < kWorld; ++r) {
    for (size_t e = 0; e < Params()[kEarlyOnly].count; ++e) {
      const double want = (TestGradient(0, 1, kEarlyOnly, e) + TestGradient(1, 1, kEarlyOnly, e)) / 2;
      ASSERT_NEAR(result[r][e], want, 1e-6 * std::fabs(want) + 1e-9);
    }
  }
}

// The headline failure: one rank leaves a parameter unused, find_unused_parameters is off. The
// healthy ranks launched their buckets during backward; the faulty rank must still complete the
// sequence, and every rank must get the same error naming rank, parameter, step and fix.
TEST(ReducerUnusedTest, UnusedOnOneRankFailsEveryRankWithoutHanging) {
  constexpr int kWorld = 3;
  constexpr size_t kUnused = 7;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<absl::Status> step1(kWorld), step2(kWorld), again(kWorld);
  RunRanks(kWorld, [&](int r) {
    auto created = Reducer::Create(ranks[r].get(), Params(), Options());
    ASSERT_TRUE(created.ok());
    Reducer* red = created->get();
    red->ZeroGradients();
    red->BeginMicroBatch(0);
    Backward(red, r, 1, {});
    step1[r] = red->FinishStep(nullptr);
    red->ZeroGradients();
    red->BeginMicroBatch(0);
    Backward(red, r, 2, r == 2 ? std::set<size_t>{kUnused} : std::set<size_t>{});
    step2[r] = red->FinishStep(nullptr);
    again[r] = red->FinishStep(nullptr);
  });
  std::cout << "rank 0's error: " << step2[0] << "\n";
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(step1[r].ok()) << step1[r];
    ASSERT_EQ(step2[r].code(), absl::StatusCode::kFailedPrecondition) << "rank " << r << ": "
                                                                       << step2[r];
    EXPECT_THAT(step2[r].message(), HasSubstr("step 2"));
    EXPECT_THAT(step2[r].message(), HasSubstr("rank 2: " + Params()[kUnused].name));
    EXPECT_THAT(step2[r].message(), Not(HasSubstr("rank 0:")));
    EXPECT_THAT(step2[r].message(), HasSubstr("set sync.find_unused_parameters: true, or freeze "
                                              "them on every rank"));
    EXPECT_EQ(again[r], step2[r]) << "the failure is sticky";
  }
}

// A desync: rank 1 plans one extra bucket all-reduce at step 2. The ledger check (before any
// bucket goes out) makes every rank fail naming the first divergent collective.
TEST(ReducerUnusedTest, ExtraBucketOnOneRankIsNamedByTheLedgerOnEveryRank) {
  constexpr int kWorld = 3;
  auto ranks = MakeGlooRanks(kWorld);
  std::vector<absl::Status> step1(kWorld), step2(kWorld);
  std::vector<StepSyncStats> stats1(kWorld);
  std::vector<size_t> num_buckets(kWorld);
  RunRanks(kWorld, [&](int r) {
    auto created = Reducer::Create(ranks[r].get(), Params(), Options());
    ASSERT_TRUE(created.ok());
    Reducer* red = created->get();
    num_buckets[r] = red->layout().buckets.size();
    red->ZeroGradients();
    red->BeginMicroBatch(0);
    Backward(red, r, 1, {});
    step1[r] = red->FinishStep(&stats1[r]);
    if (r == 1) red->InjectExtraBucketForTest(16);
    red->ZeroGradients();
    red->BeginMicroBatch(0);
    Backward(red, r, 2, {});
    step2[r] = red->FinishStep(nullptr);
  });
  std::cout << "rank 0's error: " << step2[0] << "\n";
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(step1[r].ok()) << step1[r];
    EXPECT_TRUE(stats1[r].ledger_checked);
    EXPECT_EQ(stats1[r].collective_digest, stats1[0].collective_digest);
    ASSERT_EQ(step2[r].code(), absl::StatusCode::kFailedPrecondition) << "rank " << r << ": "
                                                                       << step2[r];
    const std::string& msg = std::string(step2[r].message());
    EXPECT_THAT(msg, HasSubstr("collective desync at step 2"));
    EXPECT_THAT(msg, HasSubstr("first divergent collective"));
    EXPECT_THAT(msg, HasSubstr(absl::StrCat("rank 1 issued #", num_buckets[r], " allreduce bucket ",
                                            num_buckets[r], ", 16 x fp32")));
    EXPECT_THAT(msg, HasSubstr(absl::StrCat("rank 0 issued #", num_buckets[r],
                                            " allreduce bucket 0,")));
    EXPECT_THAT(msg, HasSubstr("{0, 2}"));
  }
}

}  // namespace
}  // namespace ringleader
