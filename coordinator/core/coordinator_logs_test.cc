// Coordinator core: the ranks' output. AppendLogs checks, GetLogs reads and long polls (bytes of
// the ranks asked for, the deadline, the end of the attempt after log_linger), generations, and
// shutdown. Fake clock.
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using CapturedLogs = Captured<absl::StatusOr<v1::GetLogsResponse>>;

// The chunks of an answer as "rank:offset:skipped:data" lines.
std::vector<std::string> Chunks(const v1::GetLogsResponse& response) {
  std::vector<std::string> shown;
  for (const v1::LogChunk& chunk : response.chunks()) {
    shown.push_back(
        absl::StrCat(chunk.rank(), ":", chunk.offset(), ":", chunk.skipped(), ":", chunk.data()));
  }
  return shown;
}

class CoordinatorLogsTest : public CoordinatorTest {
 protected:
  // Workers "a" and "b" run a job of world size 2, joined (generation 1).
  void SetUp() override {
    a_ = Register("a");
    b_ = Register("b");
    job_ = Submit(2);
    attempt_ = AttemptId{job_, Generation(1)};
    TakeAndJoin({a_, b_});
  }

  absl::Status Append(uint32_t rank, uint64_t offset, const std::string& data) {
    return coordinator_.AppendLogs(attempt_, Rank(rank), offset, data);
  }

  // GetLogs waiting `wait` (zero: answered at once).
  void Get(CapturedLogs* captured, Coordinator::LogsQuery query,
           absl::Duration wait = absl::ZeroDuration()) {
    coordinator_.GetLogsAsync(job_, std::move(query), clock_.Now() + wait, captured->Callback());
  }

  WorkerId a_, b_;
  JobId job_;
  AttemptId attempt_;
};

TEST_F(CoordinatorLogsTest, OutputIsReadBackByRankFromTheCursors) {
  ASSERT_TRUE(Append(1, 0, "r1 starts\n").ok());
  ASSERT_TRUE(Append(0, 0, "r0 starts\n").ok());
  ASSERT_TRUE(Append(0, 10, "r0 step 1\n").ok());
  ASSERT_TRUE(Append(0, 10, "r0 step 1\n").ok());  // a retry changes nothing

  CapturedLogs all;
  Get(&all, {});
  ASSERT_EQ(all.calls(), 1);
  ASSERT_TRUE(all.value().ok()) << all.value().status();
  EXPECT_EQ(all.value()->generation(), 1u);
  EXPECT_THAT(Chunks(*all.value()),
              testing::ElementsAre("0:0:0:r0 starts\nr0 step 1\n", "1:0:0:r1 starts\n"));
  EXPECT_FALSE(all.value()->attempt_over());
  EXPECT_FALSE(all.value()->job_over());

  // Rank 0 from byte 10 of the latest generation; rank 1 is at its end already.
  CapturedLogs after;
  Get(&after, {std::nullopt, Generation(0), {{0, 10}, {1, 10}}});
  ASSERT_TRUE(after.value().ok());
  EXPECT_THAT(Chunks(*after.value()), testing::ElementsAre("0:10:0:r0 step 1\n"));

  CapturedLogs one;
  Get(&one, {Rank(1), Generation(1), {}});
  ASSERT_TRUE(one.value().ok());
  EXPECT_THAT(Chunks(*one.value()), testing::ElementsAre("1:0:0:r1 starts\n"));

  // A gap (bytes the daemon skipped) is reported as skipped.
  ASSERT_TRUE(Append(1, 100, "later\n").ok());
  CapturedLogs gap;
  Get(&gap, {Rank(1), Generation(1), {{1, 10}}});
  ASSERT_TRUE(gap.value().ok());
  EXPECT_THAT(Chunks(*gap.value()), testing::ElementsAre("1:100:90:later\n"));
}

TEST_F(CoordinatorLogsTest, AppendLogsRefusesUnknownJobsStaleGenerationsAndBadRanks) {
  EXPECT_EQ(coordinator_.AppendLogs(AttemptId{JobId("job-000042"), Generation(1)}, Rank(0), 0, "x")
                .code(),
            absl::StatusCode::kNotFound);
  const absl::Status stale =
      coordinator_.AppendLogs(AttemptId{job_, Generation(2)}, Rank(0), 0, "x");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.message(), HasSubstr("stale generation 2 for job job-000001 (current 1)"));
  const absl::Status out_of_range = Append(2, 0, "x");
  EXPECT_EQ(out_of_range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.message(), HasSubstr("rank 2 is out of range"));
  const JobId queued = Submit(2);  // no idle worker: never assigned
  EXPECT_EQ(coordinator_.AppendLogs(AttemptId{queued, Generation(0)}, Rank(0), 0, "x").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CoordinatorLogsTest, GetLogsRefusesUnknownJobsBadRanksAndGenerationsNeverRun) {
  CapturedLogs unknown;
  coordinator_.GetLogsAsync(JobId("job-000042"), {}, clock_.Now(), unknown.Callback());
  EXPECT_EQ(unknown.value().status().code(), absl::StatusCode::kNotFound);

  CapturedLogs rank;
  Get(&rank, {Rank(2), Generation(0), {}});
  EXPECT_EQ(rank.value().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rank.value().status().message(), HasSubstr("rank 2 is out of range"));

  CapturedLogs cursor;
  Get(&cursor, {std::nullopt, Generation(0), {{7, 0}}});
  EXPECT_EQ(cursor.value().status().code(), absl::StatusCode::kInvalidArgument);

  CapturedLogs generation;
  Get(&generation, {std::nullopt, Generation(3), {}});
  EXPECT_EQ(generation.value().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(generation.value().status().message(),
              HasSubstr("job job-000001 has no generation 3 (its latest is 1)"));

  // A job that has not run: its latest attempt is "none yet", answered at once even when asked
  // to wait; a generation of it is refused.
  const JobId queued = Submit(2);
  CapturedLogs latest;
  coordinator_.GetLogsAsync(queued, {}, clock_.Now() + absl::Seconds(20), latest.Callback());
  ASSERT_EQ(latest.calls(), 1);
  ASSERT_TRUE(latest.value().ok());
  EXPECT_EQ(latest.value()->generation(), 0u);
  EXPECT_EQ(latest.value()->chunks_size(), 0);
  EXPECT_FALSE(latest.value()->attempt_over());
  CapturedLogs first;
  coordinator_.GetLogsAsync(queued, {std::nullopt, Generation(1), {}}, clock_.Now(),
                            first.Callback());
  EXPECT_THAT(first.value().status().message(), HasSubstr("it has not run yet (QUEUED)"));
}

TEST_F(CoordinatorLogsTest, ALongPollWaitsForNewBytesOfTheRanksAskedFor) {
  ASSERT_TRUE(Append(1, 0, "old\n").ok());
  CapturedLogs poll;
  Get(&poll, {Rank(1), Generation(0), {{1, 4}}}, absl::Seconds(20));
  EXPECT_EQ(poll.calls(), 0) << "no bytes past the cursor yet";
  ASSERT_TRUE(Append(0, 0, "rank 0 speaks\n").ok());
  ASSERT_TRUE(Append(1, 0, "old\n").ok());  // a retry: nothing new
  EXPECT_EQ(poll.calls(), 0);
  ASSERT_TRUE(Append(1, 4, "new\n").ok());
  ASSERT_EQ(poll.calls(), 1);
  ASSERT_TRUE(poll.value().ok());
  EXPECT_THAT(Chunks(*poll.value()), testing::ElementsAre("1:4:0:new\n"));
  EXPECT_FALSE(poll.value()->attempt_over());

  // Every rank: any rank's bytes answer.
  CapturedLogs every;
  Get(&every, {std::nullopt, Generation(0), {{0, 14}, {1, 8}}}, absl::Seconds(20));
  EXPECT_EQ(every.calls(), 0);
  ASSERT_TRUE(Append(0, 14, "more\n").ok());
  ASSERT_EQ(every.calls(), 1);
  EXPECT_THAT(Chunks(*every.value()), testing::ElementsAre("0:14:0:more\n"));
}

TEST_F(CoordinatorLogsTest, ALongPollEndsAtItsDeadlineClampedToMaxWait) {
  CapturedLogs poll;
  Get(&poll, {}, absl::Seconds(5));
  Advance(absl::Milliseconds(4999));
  EXPECT_EQ(poll.calls(), 0);
  Advance(absl::Milliseconds(1));
  ASSERT_EQ(poll.calls(), 1);
  ASSERT_TRUE(poll.value().ok());
  EXPECT_EQ(poll.value()->chunks_size(), 0);
  EXPECT_FALSE(poll.value()->attempt_over());

  CapturedLogs long_poll;
  Get(&long_poll, {}, absl::Hours(1));
  for (int i = 0; i < 6; ++i) {  // max_wait is 30 s; the workers keep their leases meanwhile
    EXPECT_EQ(long_poll.calls(), 0) << "after " << 5 * i << " s";
    ASSERT_TRUE(coordinator_.Heartbeat(a_, 1).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(b_, 1).ok());
    Advance(absl::Seconds(5));
  }
  EXPECT_EQ(long_poll.calls(), 1);
}

// The daemons ship a rank's last output after its process exited, which is often after the
// attempt ended: that output is still taken, and readers are told the attempt is over only
// log_linger (2 s) after its end.
TEST_F(CoordinatorLogsTest, TheEndOfTheAttemptIsToldAfterTheLingerAndLateOutputIsKept) {
  ASSERT_TRUE(Append(0, 0, "training\n").ok());
  CapturedLogs poll;
  Get(&poll, {std::nullopt, Generation(0), {{0, 9}}}, absl::Seconds(20));
  ASSERT_TRUE(coordinator_.CancelJob(job_, "enough").ok());
  EXPECT_EQ(poll.calls(), 0) << "answered before the last output could arrive";
  ASSERT_TRUE(Append(0, 9, "terminated\n").ok());  // the daemon's final drain
  ASSERT_EQ(poll.calls(), 1);
  EXPECT_THAT(Chunks(*poll.value()), testing::ElementsAre("0:9:0:terminated\n"));
  EXPECT_FALSE(poll.value()->attempt_over());
  EXPECT_TRUE(poll.value()->job_over());

  CapturedLogs last;
  Get(&last, {std::nullopt, Generation(0), {{0, 20}}}, absl::Seconds(20));
  Advance(absl::Milliseconds(1999));
  EXPECT_EQ(last.calls(), 0);
  Advance(absl::Milliseconds(1));
  ASSERT_EQ(last.calls(), 1);
  EXPECT_EQ(last.value()->chunks_size(), 0);
  EXPECT_TRUE(last.value()->attempt_over());
  EXPECT_TRUE(last.value()->job_over());

  // Over now: a reader from the start gets everything and "over" at once, even when waiting.
  CapturedLogs reread;
  Get(&reread, {}, absl::Seconds(20));
  ASSERT_EQ(reread.calls(), 1);
  EXPECT_THAT(Chunks(*reread.value()), testing::ElementsAre("0:0:0:training\nterminated\n"));
  EXPECT_TRUE(reread.value()->attempt_over());
}

// A reader behind by more than one answer carries (2 MiB) gets the rest from its next call, and
// is told the attempt is over only by the answer that holds the last bytes.
TEST_F(CoordinatorTest, AnAnswerIsBoundedAndOverOnlyOnceItHoldsEveryByte) {
  const std::vector<WorkerId> workers = {Register("a"), Register("b"), Register("c")};
  const JobId job = Submit(3);
  const std::vector<v1::Assignment> ranks = TakeAndJoin(workers);
  const std::string mib(size_t{1} << 20, 'x');
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(coordinator_.AppendLogs(AttemptOf(ranks[r]), Rank(r), 0, mib).ok());
  }
  ASSERT_TRUE(coordinator_.CancelJob(job, "enough").ok());
  Advance(absl::Seconds(2));  // past the linger
  CapturedLogs first;
  coordinator_.GetLogsAsync(job, {}, clock_.Now(), first.Callback());
  ASSERT_TRUE(first.value().ok());
  ASSERT_EQ(first.value()->chunks_size(), 2);
  EXPECT_EQ(first.value()->chunks(0).data(), mib);
  EXPECT_EQ(first.value()->chunks(1).data(), mib);
  EXPECT_FALSE(first.value()->attempt_over()) << "rank 2's output is still to read";
  CapturedLogs rest;
  coordinator_.GetLogsAsync(job, {std::nullopt, Generation(1), {{0, mib.size()}, {1, mib.size()}}},
                            clock_.Now(), rest.Callback());
  ASSERT_TRUE(rest.value().ok());
  ASSERT_EQ(rest.value()->chunks_size(), 1);
  EXPECT_EQ(rest.value()->chunks(0).rank(), 2u);
  EXPECT_EQ(rest.value()->chunks(0).data(), mib);
  EXPECT_TRUE(rest.value()->attempt_over());
  EXPECT_TRUE(rest.value()->job_over());
}

TEST_F(CoordinatorTest, EachGenerationKeepsItsOutputAndAStaleOneIsRefused) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId job = Submit(2, "gloo", /*max_restarts=*/1);
  std::vector<v1::Assignment> first = TakeAndJoin({a, b});
  ASSERT_TRUE(coordinator_.AppendLogs(AttemptOf(first[1]), Rank(1), 0, "first try\n").ok());
  CapturedLogs waiting;  // on generation 1, over once generation 2 is placed
  coordinator_.GetLogsAsync(job, {std::nullopt, Generation(1), {{1, 10}}},
                            clock_.Now() + absl::Seconds(20), waiting.Callback());
  EXPECT_EQ(waiting.calls(), 0);
  Coordinator::RankOutcome failed;
  failed.error = "killed by signal 9";
  // A first fault: generation 2 is placed at once.
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(first[1]), Rank(1), failed).ok());
  ASSERT_EQ(Job(job).generation(), 2u);
  ASSERT_EQ(waiting.calls(), 1);
  EXPECT_TRUE(waiting.value()->attempt_over());
  EXPECT_FALSE(waiting.value()->job_over());
  std::vector<v1::Assignment> second = TakeAndJoin({a, b});
  EXPECT_EQ(coordinator_.AppendLogs(AttemptOf(first[1]), Rank(1), 10, "late\n").code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(coordinator_.AppendLogs(AttemptOf(second[1]), Rank(1), 0, "second try\n").ok());

  CapturedLogs latest;
  coordinator_.GetLogsAsync(job, {}, clock_.Now(), latest.Callback());
  EXPECT_EQ(latest.value()->generation(), 2u);
  EXPECT_THAT(Chunks(*latest.value()), testing::ElementsAre("1:0:0:second try\n"));
  CapturedLogs old;
  coordinator_.GetLogsAsync(job, {std::nullopt, Generation(1), {}}, clock_.Now(), old.Callback());
  EXPECT_EQ(old.value()->generation(), 1u);
  EXPECT_THAT(Chunks(*old.value()), testing::ElementsAre("1:0:0:first try\n"));
  EXPECT_TRUE(old.value()->attempt_over());
}

TEST_F(CoordinatorLogsTest, ShutdownAnswersParkedPollsAndRefusesNewOnes) {
  CapturedLogs parked;
  Get(&parked, {}, absl::Seconds(20));
  coordinator_.Shutdown();
  ASSERT_EQ(parked.calls(), 1);
  EXPECT_EQ(parked.value().status().code(), absl::StatusCode::kUnavailable);
  CapturedLogs later;
  Get(&later, {});
  EXPECT_EQ(later.value().status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ringleader
