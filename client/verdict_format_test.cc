#include "client/verdict_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void AddFigures(google::protobuf::RepeatedPtrField<v1::RankStepFigures>* figures, uint32_t rank,
                double loss, double local_norm, double synced_norm, double drift = -1) {
  v1::RankStepFigures* f = figures->Add();
  f->set_rank(rank);
  f->set_loss(loss);
  f->set_local_grad_norm(local_norm);
  f->set_synced_grad_norm(synced_norm);
  if (drift >= 0) {
    f->set_has_drift(true);
    f->set_drift(drift);
  }
  f->set_step_ms(12.5);
}

v1::Alarm Alarm(v1::Alarm::Kind kind, uint64_t step, std::vector<uint32_t> ranks, bool failed,
                const std::string& message) {
  v1::Alarm alarm;
  alarm.set_kind(kind);
  alarm.set_step(step);
  for (uint32_t rank : ranks) alarm.add_ranks(rank);
  alarm.set_failed_job(failed);
  alarm.set_message(message);
  alarm.set_last_step(step);
  return alarm;
}

// A 2-rank job that ended in `state`, judged PASS through step 300 at 5120.4 samples/s.
v1::JobStatus Ended(v1::JobState state) {
  v1::JobStatus job;
  job.set_state(state);
  v1::EpochReport* epoch = job.add_epochs();
  epoch->set_epoch(2);
  epoch->set_test_accuracy(0.8456);
  v1::Verdict* verdict = job.mutable_verdict();
  verdict->set_result(v1::Verdict::PASS);
  verdict->set_steps_judged(300);
  verdict->set_last_step(300);
  verdict->set_samples_per_second(5120.4);
  AddFigures(verdict->mutable_last(), 0, 0.25, 2.5, 1.75, 0);
  AddFigures(verdict->mutable_last(), 1, 0.5, 3.5, 1.75, 0);
  return job;
}

// Ended(FAILED) with rank 1 unsynchronised from step 3 on, under on_desync "fail".
v1::JobStatus FailedUnsynchronised() {
  v1::JobStatus job = Ended(v1::JOB_STATE_FAILED);
  job.clear_epochs();
  v1::Verdict* verdict = job.mutable_verdict();
  verdict->set_result(v1::Verdict::FAIL);
  verdict->set_steps_judged(3);
  verdict->set_last_step(3);
  verdict->set_first_bad_step(3);
  AddFigures(verdict->mutable_first_bad(), 0, 0.7, 2.1904392, 1.7427171);
  AddFigures(verdict->mutable_first_bad(), 1, 0.6, 1.2950001, 1.2950001);
  *job.add_alarms() = Alarm(v1::Alarm::NOT_SYNCHRONIZED, 3, {1}, true,
                            "step 3: rank 1's synced grad norm equals its local norm");
  return job;
}

TEST(VerdictFormatTest, ResultNames) {
  EXPECT_EQ(VerdictResultName(v1::Verdict::RESULT_UNSPECIFIED), "not judged yet");
  EXPECT_EQ(VerdictResultName(v1::Verdict::PASS), "PASS");
  EXPECT_EQ(VerdictResultName(v1::Verdict::WARN), "WARN");
  EXPECT_EQ(VerdictResultName(v1::Verdict::FAIL), "FAIL");
  EXPECT_EQ(VerdictResultName(static_cast<v1::Verdict::Result>(9)), "UNKNOWN(9)");
}

TEST(VerdictFormatTest, SummaryShowsStepsFirstBadStepAndRate) {
  EXPECT_EQ(SummarizeVerdict(v1::Verdict()), "not judged yet (0 steps judged)");
  EXPECT_EQ(SummarizeVerdict(Ended(v1::JOB_STATE_SUCCEEDED).verdict()),
            "PASS (300 steps judged, 5120 train samples/s)");
  v1::Verdict verdict = FailedUnsynchronised().verdict();
  verdict.set_samples_per_second(42.5);
  EXPECT_EQ(SummarizeVerdict(verdict),
            "FAIL (3 steps judged, first bad step 3, 42.5 train "
            "samples/s)");
  verdict.set_steps_judged(1);
  verdict.set_samples_per_second(0);
  EXPECT_EQ(SummarizeVerdict(verdict), "FAIL (1 step judged, first bad step 3)");
}

TEST(VerdictFormatTest, AlarmLineHasKindStepRanksMessageRepeatsAndPolicy) {
  v1::Alarm alarm = Alarm(v1::Alarm::GRAD_NORM_MISMATCH, 3, {0, 1}, true, "norms differ");
  alarm.set_repeats(5);
  alarm.set_last_step(8);
  EXPECT_EQ(FormatAlarm(alarm),
            "GRAD_NORM_MISMATCH at step 3, ranks 0, 1: norms differ (+5 later steps, last at step "
            "8)  [failed the job]");
  v1::Alarm drift = Alarm(v1::Alarm::DRIFT, 50, {1}, false, "drift 3e-07");
  drift.set_tensor("fc2.weight");
  drift.set_repeats(1);
  drift.set_last_step(60);
  EXPECT_EQ(FormatAlarm(drift),
            "DRIFT at step 50, rank 1, tensor fc2.weight: drift 3e-07 (+1 later step, last at "
            "step 60)  [warning]");
  EXPECT_EQ(FormatAlarm(Alarm(v1::Alarm::STRAGGLER, 40, {2}, false, "slow")),
            "STRAGGLER at step 40, rank 2: slow  [warning]");
}

TEST(VerdictFormatTest, RankFiguresTableShowsDriftOnlyWhereMeasured) {
  google::protobuf::RepeatedPtrField<v1::RankStepFigures> figures;
  AddFigures(&figures, 0, 0.4321, 2.1904392, 1.7427171, 0);
  AddFigures(&figures, 1, 0.5, 1.2950001, 1.2950001);
  EXPECT_EQ(FormatRankFigures(figures, "  "),
            "  RANK  LOSS    LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
            "  0     0.4321  2.1904392   1.7427171    0      12.5\n"
            "  1     0.5     1.2950001   1.2950001    -      12.5\n");
}

TEST(VerdictFormatTest, NoRankFiguresNoTable) { EXPECT_EQ(FormatRankFigures({}, "  "), ""); }

TEST(VerdictFormatTest, StragglerTable) {
  google::protobuf::RepeatedPtrField<v1::StragglerScore> scores;
  v1::StragglerScore* fast = scores.Add();
  fast->set_rank(0);
  fast->set_median_step_ms(40);
  fast->set_median_compute_ms(10);
  fast->set_median_comm_ms(30);
  fast->set_ratio_to_median(1);
  v1::StragglerScore* slow = scores.Add();
  slow->set_rank(1);
  slow->set_score(1);
  slow->set_median_step_ms(41.5);
  slow->set_median_compute_ms(38.25);
  slow->set_median_comm_ms(3.25);
  slow->set_ratio_to_median(3.75);
  slow->set_mean_wait_caused_ms(28.25);
  slow->set_last_arrival_fraction(0.95);
  slow->set_flagged(true);
  slow->set_suspected_cause("compute");
  EXPECT_EQ(FormatStragglers(scores, ""),
            "RANK  SCORE  WAIT_CAUSED_MS  LAST_ARRIVAL  MEDIAN_STEP_MS  MEDIAN_COMPUTE_MS  "
            "MEDIAN_COMM_MS  RATIO  FLAGGED  SUSPECTED_CAUSE\n"
            "0     0      0               0             40              10                 "
            "30              1      no       -\n"
            "1     1      28.25           0.95          41.5            38.25              "
            "3.25            3.75   yes      compute\n");
}

TEST(VerdictFormatTest, RunPassesOnlyWhenSucceededAndPassOrWarn) {
  v1::JobStatus job = Ended(v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(RunPassed(job));
  job.mutable_verdict()->set_result(v1::Verdict::WARN);
  EXPECT_TRUE(RunPassed(job));
  job.mutable_verdict()->set_result(v1::Verdict::FAIL);
  EXPECT_FALSE(RunPassed(job));
  job.mutable_verdict()->set_result(v1::Verdict::RESULT_UNSPECIFIED);
  EXPECT_FALSE(RunPassed(job));
  EXPECT_FALSE(RunPassed(Ended(v1::JOB_STATE_CANCELLED)));
  EXPECT_FALSE(RunPassed(Ended(v1::JOB_STATE_FAILED)));
}

TEST(VerdictFormatTest, FinalVerdictOfACleanRun) {
  EXPECT_EQ(FormatFinalVerdict(Ended(v1::JOB_STATE_SUCCEEDED)),
            "verdict\n"
            "  state           SUCCEEDED\n"
            "  final accuracy  0.8456 (epoch 2)\n"
            "  first bad step  none\n"
            "  last step       300\n"
            "    RANK  LOSS  LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
            "    0     0.25  2.5         1.75         0      12.5\n"
            "    1     0.5   3.5         1.75         0      12.5\n"
            "  alarms          none\n"
            "result: PASS (300 steps judged, 5120 train samples/s)\n");
}

TEST(VerdictFormatTest, FinalVerdictOfAFailedCheckShowsTheFirstBadStep) {
  const std::string text = FormatFinalVerdict(FailedUnsynchronised());
  EXPECT_THAT(text, HasSubstr("  state           FAILED  [FAIL]\n"
                              "  final accuracy  - (no epoch finished)\n"
                              "  first bad step  3\n"
                              "    RANK  LOSS  LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
                              "    0     0.7   2.1904392   1.7427171    -      12.5\n"
                              "    1     0.6   1.2950001   1.2950001    -      12.5\n"
                              "  last step       3\n"));
  EXPECT_THAT(text, HasSubstr("  alarms          1 (1 failed the job, 0 warnings)\n"
                              "    NOT_SYNCHRONIZED at step 3, rank 1: step 3: rank 1's synced "
                              "grad norm equals its local norm  [failed the job]\n"));
  EXPECT_THAT(text, HasSubstr("\nresult: FAIL (3 steps judged, first bad step 3, 5120 train "
                              "samples/s): the job ended FAILED\n"));
}

TEST(VerdictFormatTest, FinalVerdictOfASucceededRunWithWarnings) {
  v1::JobStatus job = Ended(v1::JOB_STATE_SUCCEEDED);
  job.mutable_verdict()->set_result(v1::Verdict::WARN);
  job.mutable_verdict()->set_first_bad_step(120);
  AddFigures(job.mutable_verdict()->mutable_first_bad(), 0, 0.3, 2.5, 1.75, 0);
  AddFigures(job.mutable_verdict()->mutable_first_bad(), 1, 0.3, 3.5, 1.75, 4e-7);
  v1::Alarm drift = Alarm(v1::Alarm::DRIFT, 120, {1}, false, "drift 4e-07 > 1e-06");
  drift.set_repeats(2);
  drift.set_last_step(300);
  *job.add_alarms() = drift;
  *job.add_alarms() = Alarm(v1::Alarm::STRAGGLER, 200, {0}, false, "rank 0 is slow");
  const std::string text = FormatFinalVerdict(job);
  EXPECT_THAT(text, HasSubstr("  first bad step  120\n"));
  EXPECT_THAT(text, HasSubstr("    1     0.3   3.5         1.75         4e-07  12.5\n"));
  EXPECT_THAT(text, HasSubstr("  alarms          2 (0 failed the job, 2 warnings)\n"));
  EXPECT_THAT(text, HasSubstr("(+2 later steps, last at step 300)  [warning]\n"));
  EXPECT_THAT(text, HasSubstr("STRAGGLER at step 200, rank 0: rank 0 is slow  [warning]\n"));
  EXPECT_THAT(text, HasSubstr("\nresult: WARN (300 steps judged, first bad step 120, 5120 train "
                              "samples/s): the job succeeded with 2 warnings (see the alarms "
                              "above)\n"));
  EXPECT_THAT(text, Not(HasSubstr("[FAIL]")));
}

TEST(VerdictFormatTest, FinalVerdictOfAnUnjudgedOrCancelledRunSaysWhy) {
  v1::JobStatus unjudged;
  unjudged.set_state(v1::JOB_STATE_SUCCEEDED);
  const std::string text = FormatFinalVerdict(unjudged);
  EXPECT_THAT(text, HasSubstr("  last step       none judged\n"));
  EXPECT_THAT(text, HasSubstr("result: not judged yet (0 steps judged): the coordinator judged no "
                              "step\n"));
  EXPECT_THAT(FormatFinalVerdict(Ended(v1::JOB_STATE_CANCELLED)),
              HasSubstr("result: PASS (300 steps judged, 5120 train samples/s): the job ended "
                        "CANCELLED\n"));
}

}  // namespace
}  // namespace ringleader
