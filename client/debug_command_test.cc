#include <string>

#include "client/commands.h"
#include "client/commands_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Return;

v1::CollectiveTraceEntry Entry(uint64_t sequence, v1::CollectiveTraceEntry::State state) {
  v1::CollectiveTraceEntry e;
  e.set_sequence(sequence);
  e.set_step(14);
  e.set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  e.set_bucket(3);
  e.set_dtype("fp32");
  e.set_bytes(4096);
  e.set_state(state);
  e.set_enqueued_us(1000);
  e.set_started_us(1500);
  if (state == v1::CollectiveTraceEntry::COMPLETED) e.set_completed_us(3500);
  return e;
}

v1::DebugJobResponse Hung() {
  v1::DebugJobResponse response;
  v1::HangReport* report = response.mutable_report();
  report->set_summary("collective #42 all_reduce bucket 3, fp32, 4.0 KB: rank 1 never entered it");
  report->set_ranks_disagree(true);
  report->set_first_sequence(42);
  report->add_never_entered(1);
  v1::RankTrace* r0 = report->add_ranks();
  r0->set_rank(0);
  r0->set_answered(true);
  r0->set_collectives_issued(43);
  r0->set_collectives_completed(42);
  r0->set_silent_ms(120);
  *r0->add_entries() = Entry(41, v1::CollectiveTraceEntry::COMPLETED);
  *r0->add_entries() = Entry(42, v1::CollectiveTraceEntry::STARTED);
  v1::RankTrace* r1 = report->add_ranks();
  r1->set_rank(1);
  r1->set_collectives_issued(42);
  r1->set_collectives_completed(42);
  r1->set_silent_ms(12300);
  return response;
}

TEST_F(CommandsTest, DebugNamesTheRankThatNeverEnteredAndShowsTheRings) {
  EXPECT_CALL(client_, Debug("j-3", 5000u)).WillOnce(Return(Hung()));
  DebugOptions options;
  EXPECT_EQ(RunDebug("j-3", options, client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("job j-3: collective #42 all_reduce bucket 3, fp32, 4.0 KB: rank 1 "
                              "never entered it\n"));
  EXPECT_THAT(text, HasSubstr("RANK  ANSWERED  SILENT  ISSUED  COMPLETED  AT_#42\n"
                              "0     yes       120ms   43      42         started\n"
                              "1     no        12.3s   42      42         never entered\n"));
  EXPECT_THAT(text, HasSubstr("rank 0: last 2 of 2 collectives\n"
                              "  SEQ  STEP  OP          BUCKET  DTYPE  BYTES  STATE      "
                              "QUEUED_MS  RAN_MS\n"
                              "  41   14    all_reduce  3       fp32   4096   completed  0.5        2\n"
                              "  42   14    all_reduce  3       fp32   4096   started    0.5        -\n"));
  EXPECT_THAT(text, Not(HasSubstr("rank 1: last")));  // silent: no ring
}

TEST_F(CommandsTest, DebugOfAJobWithoutAnAttemptSaysWhy) {
  EXPECT_CALL(client_, Debug("j-9", 1000u))
      .WillOnce(Return(absl::FailedPreconditionError("job j-9 has no running attempt")));
  DebugOptions options;
  options.wait_ms = 1000;
  EXPECT_NE(RunDebug("j-9", options, client_, env_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("cannot debug job j-9"));
  EXPECT_THAT(err_.str(), HasSubstr("no running attempt"));
}

}  // namespace
}  // namespace ringleader
