#include "coordinator/core/hang_report.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using State = v1::CollectiveTraceEntry;

v1::CollectiveTraceEntry Entry(uint64_t sequence, v1::CollectiveTraceEntry::State state,
                               int bucket = 3) {
  v1::CollectiveTraceEntry e;
  e.set_sequence(sequence);
  e.set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  e.set_dtype("fp32");
  e.set_bytes(1 << 20);
  e.set_bucket(bucket);
  e.set_state(state);
  return e;
}

// A rank that answered with entries first..first+states.size()-1.
v1::RankTrace Answered(uint32_t rank, uint64_t first, std::vector<State::State> states) {
  v1::RankTrace t;
  t.set_rank(rank);
  t.set_answered(true);
  uint64_t completed = first;
  for (size_t i = 0; i < states.size(); ++i) {
    *t.add_entries() = Entry(first + i, states[i]);
    if (states[i] == State::COMPLETED && completed == first + i) ++completed;
  }
  t.set_collectives_issued(first + states.size());
  t.set_collectives_completed(completed);
  return t;
}

v1::RankTrace Silent(uint32_t rank, uint64_t issued, int64_t silent_ms) {
  v1::RankTrace t;
  t.set_rank(rank);
  t.set_collectives_issued(issued);
  t.set_collectives_completed(issued);
  t.set_silent_ms(silent_ms);
  return t;
}

TEST(HangReportTest, AStoppedRankThatNeverEnteredIsNamedWhileTheOthersWaitInIt) {
  // Rank 1 was stopped in its compute after collective #41; ranks 0 and 2 wait in #42.
  v1::HangReport report = AnalyzeHang(
      {Answered(2, 40, {State::COMPLETED, State::COMPLETED, State::STARTED, State::ENQUEUED}),
       Silent(1, 42, 12300),
       Answered(0, 40, {State::COMPLETED, State::COMPLETED, State::STARTED})});
  EXPECT_TRUE(report.ranks_disagree());
  EXPECT_EQ(report.first_sequence(), 42u);
  EXPECT_THAT(report.never_entered(), ElementsAre(1u));
  EXPECT_EQ(report.summary(),
            "collective #42 all_reduce bucket 3, fp32, 1.0 MB: rank 1 never entered it (silent "
            "12.3 s; when last heard from, its last collective was #41); ranks 0, 2 wait in it");
  ASSERT_EQ(report.ranks_size(), 3);
  EXPECT_EQ(report.ranks(0).rank(), 0u);  // sorted by rank
}

TEST(HangReportTest, AnAnsweringRankBehindTheOthersNeverEnteredIt) {
  // Rank 0 is alive but stuck before #7 (e.g. in a data loader); rank 1 waits in #7.
  v1::HangReport report =
      AnalyzeHang({Answered(0, 5, {State::COMPLETED, State::COMPLETED}),
                   Answered(1, 5, {State::COMPLETED, State::COMPLETED, State::STARTED})});
  EXPECT_EQ(report.first_sequence(), 7u);
  EXPECT_THAT(report.never_entered(), ElementsAre(0u));
  EXPECT_THAT(report.summary(), HasSubstr("rank 0 never entered it (its last collective was #6)"));
  EXPECT_THAT(report.summary(), HasSubstr("rank 1 wait in it"));
}

TEST(HangReportTest, ASilentRankThatHadIssuedTheCollectiveIsNotSaidToHaveMissedIt) {
  v1::HangReport report = AnalyzeHang(
      {Answered(0, 0, {State::COMPLETED, State::STARTED}), Silent(1, 2, 4000)});
  EXPECT_EQ(report.first_sequence(), 1u);
  EXPECT_THAT(report.never_entered(), testing::IsEmpty());
  EXPECT_THAT(report.summary(),
              HasSubstr("rank 1 is silent (4.0 s) and had issued it when last heard from"));
}

TEST(HangReportTest, ARankWhoseCollectiveTimedOutGaveUpInIt) {
  v1::HangReport report = AnalyzeHang(
      {Answered(1, 11, {State::COMPLETED, State::FAILED}), Silent(0, 12, 20000)});
  EXPECT_EQ(report.first_sequence(), 12u);
  EXPECT_THAT(report.never_entered(), ElementsAre(0u));
  EXPECT_THAT(report.summary(), HasSubstr("rank 1 waited in it and gave up (failed)"));
}

TEST(HangReportTest, RanksThatCompletedEverythingAgree) {
  v1::HangReport report = AnalyzeHang({Answered(0, 0, {State::COMPLETED, State::COMPLETED}),
                                       Answered(1, 0, {State::COMPLETED, State::COMPLETED})});
  EXPECT_FALSE(report.ranks_disagree());
  EXPECT_THAT(report.summary(), HasSubstr("the ranks agree"));
}

}  // namespace
}  // namespace ringleader
