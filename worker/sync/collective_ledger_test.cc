#include "worker/sync/collective_ledger.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/sync_test_util.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

CollectiveRecord Rec(uint64_t seq, int32_t bucket, uint64_t count,
                     DataType dtype = DataType::kFloat32) {
  CollectiveRecord r;
  r.sequence = seq;
  r.kind = CollectiveKind::kAllReduce;
  r.bucket = bucket;
  r.count = count;
  r.dtype = dtype;
  return r;
}

TEST(CollectiveLedgerTest, RecordsGetSequenceNumbersAndWindowsMoveOut) {
  CollectiveLedger ledger;
  EXPECT_EQ(ledger.Record(CollectiveKind::kAllReduce, 0, 10, DataType::kFloat32).sequence, 0u);
  EXPECT_EQ(ledger.Record(CollectiveKind::kAllReduce, 1, 20, DataType::kFloat32).sequence, 1u);
  auto first = ledger.TakeWindow();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].count, 20u);
  EXPECT_TRUE(ledger.TakeWindow().empty());
  EXPECT_EQ(ledger.Record(CollectiveKind::kBroadcast, kTagBuffer, 5, DataType::kUInt8).sequence,
            2u);
  EXPECT_EQ(ledger.size(), 3u);
}

TEST(CollectiveLedgerTest, EncodingRoundTripsAndDigestSeesEveryField) {
  CollectiveRecord r = Rec(123456789012ull, -4, 1ull << 40, DataType::kBFloat16);
  r.kind = CollectiveKind::kBroadcast;
  uint8_t buf[kRecordWireBytes];
  EncodeRecord(r, buf);
  EXPECT_EQ(DecodeRecord(buf), r);

  const std::vector<CollectiveRecord> base = {Rec(0, 0, 100), Rec(1, 1, 200)};
  const uint64_t d = DigestRecords(base);
  EXPECT_EQ(d, DigestRecords(base));
  auto changed = [&](auto mutate) {
    auto copy = base;
    mutate(copy[1]);
    return DigestRecords(copy);
  };
  EXPECT_NE(d, changed([](CollectiveRecord& x) { x.sequence = 7; }));
  EXPECT_NE(d, changed([](CollectiveRecord& x) { x.kind = CollectiveKind::kAllGather; }));
  EXPECT_NE(d, changed([](CollectiveRecord& x) { x.bucket = 2; }));
  EXPECT_NE(d, changed([](CollectiveRecord& x) { x.count = 201; }));
  EXPECT_NE(d, changed([](CollectiveRecord& x) { x.dtype = DataType::kBFloat16; }));
  EXPECT_NE(d, DigestRecords({base[0]}));
}

TEST(CollectiveLedgerTest, FirstDivergenceNamesEntryRanksAndRecords) {
  std::vector<CollectiveRecord> same = {Rec(0, 0, 100), Rec(1, 1, 200), Rec(2, 2, 300)};
  EXPECT_EQ(DescribeFirstDivergence(4, {same, same, same}), "");

  auto swapped = same;
  swapped[1] = Rec(1, 2, 200);  // same size, different bucket: the silent kind of desync
  std::string msg = DescribeFirstDivergence(4, {same, same, swapped, same});
  EXPECT_THAT(msg, HasSubstr("step 4"));
  EXPECT_THAT(msg, HasSubstr("entry 1"));
  EXPECT_THAT(msg, HasSubstr("rank 0 issued #1 allreduce bucket 1, 200 x fp32"));
  EXPECT_THAT(msg, HasSubstr("rank 2 issued #1 allreduce bucket 2, 200 x fp32"));
  EXPECT_THAT(msg, HasSubstr("{0, 1, 3}"));

  auto shorter = same;
  shorter.pop_back();
  msg = DescribeFirstDivergence(9, {same, shorter});
  EXPECT_THAT(msg, HasSubstr("entry 2"));
  EXPECT_THAT(msg, HasSubstr("rank 1 issued nothing"));
}

// The check over real gloo ranks: equal windows pass; a rank with an extra record makes every
// rank fail, naming the first divergent collective.
TEST(LedgerCheckTest, AgreesOrNamesTheDivergenceOnEveryRank) {
  constexpr int kWorld = 3;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<absl::Status> ok_results(kWorld), bad_results(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    std::vector<CollectiveRecord> window = {Rec(0, 0, 100), Rec(1, 1, 200)};
    ok_results[r] = LedgerCheck::Start(ranks[r].get(), 1, window, absl::Seconds(10))->Finish();
    std::vector<CollectiveRecord> window2 = {Rec(2, 0, 100), Rec(3, 1, 200)};
    if (r == 1) window2.insert(window2.begin(), Rec(2, 7, 16));
    auto check = LedgerCheck::Start(ranks[r].get(), 2, window2, absl::Seconds(10));
    bad_results[r] = check->Finish();
    EXPECT_EQ(check->Finish(), bad_results[r]) << "Finish must be idempotent";
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(ok_results[r].ok()) << ok_results[r];
    EXPECT_EQ(bad_results[r].code(), absl::StatusCode::kFailedPrecondition) << bad_results[r];
    EXPECT_THAT(bad_results[r].message(), HasSubstr("entry 0"));
    EXPECT_THAT(bad_results[r].message(), HasSubstr("rank 1 issued #2 allreduce bucket 7, 16"));
    EXPECT_THAT(bad_results[r].message(), HasSubstr("rank 0 issued #2 allreduce bucket 0, 100"));
    EXPECT_THAT(bad_results[r].message(), HasSubstr("{0, 2}"));
  }
}

TEST(LedgerCheckTest, DifferentStepNumbersAreADesync) {
  constexpr int kWorld = 2;
  auto ranks = sync_test::MakeGlooRanks(kWorld);
  std::vector<absl::Status> results(kWorld);
  sync_test::RunRanks(kWorld, [&](int r) {
    results[r] = LedgerCheck::Start(ranks[r].get(), r == 0 ? 5 : 6, {Rec(0, 0, 10)},
                                    absl::Seconds(10))
                     ->Finish();
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(results[r].message(), HasSubstr("rank 0: 5, rank 1: 6"));
  }
}

}  // namespace
}  // namespace ringleader
