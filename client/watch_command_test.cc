// `ringleader watch`: following a job's versions, progress lines, alarms, the verdict at the end,
// retries while the coordinator is unreachable, and submit --watch.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/commands_test_util.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Not;
using ::testing::Return;
using ::testing::StrictMock;

// ----- watch --------------------------------------------------------------------------------

v1::WatchJobResponse Watched(v1::JobStatus job, uint64_t version) {
  job.set_version(version);
  v1::WatchJobResponse response;
  *response.mutable_job() = std::move(job);
  return response;
}

v1::JobStatus WithSteps(v1::JobStatus job, uint64_t step) {
  job.mutable_ranks(0)->mutable_last_step()->set_step(step);
  job.mutable_ranks(1)->mutable_last_step()->set_step(step);
  return job;
}

// The coordinator's verdict `result` through `last_step`, with both ranks' figures there.
v1::JobStatus Judged(v1::JobStatus job, v1::Verdict::Result result, uint64_t last_step) {
  v1::Verdict* verdict = job.mutable_verdict();
  verdict->set_result(result);
  verdict->set_steps_judged(last_step);
  verdict->set_last_step(last_step);
  verdict->set_samples_per_second(2560);
  verdict->clear_last();
  for (uint32_t r = 0; r < 2; ++r) {
    v1::RankStepFigures* figures = verdict->add_last();
    figures->set_rank(r);
    figures->set_loss(0.4321);
    figures->set_local_grad_norm(2.5 + r);
    figures->set_synced_grad_norm(1.75);
    figures->set_has_drift(true);
    figures->set_step_ms(12.5);
  }
  return job;
}

v1::Alarm MakeAlarm(v1::Alarm::Kind kind, uint64_t step, uint32_t rank, bool failed_job,
                    const std::string& message) {
  v1::Alarm alarm;
  alarm.set_kind(kind);
  alarm.set_step(step);
  alarm.add_ranks(rank);
  alarm.set_failed_job(failed_job);
  alarm.set_message(message);
  alarm.set_last_step(step);
  return alarm;
}

v1::JobStatus Finished(v1::JobStatus job, v1::JobState state) {
  job.set_state(state);
  v1::StateTransition* transition = job.add_transitions();
  transition->set_state(state);
  transition->set_time_unix_ms(1'700'000'100'000);
  transition->set_reason("all ranks finished");
  v1::EpochReport* epoch = job.add_epochs();
  epoch->set_epoch(2);
  epoch->set_test_accuracy(0.8456);
  return job;
}

TEST_F(CommandsTest, WatchFollowsVersionsUntilSucceededAndShowsThePassVerdict) {
  const v1::JobStatus running = RunningJob();
  {
    InSequence order;
    EXPECT_CALL(client_, Watch("j-3", 0, absl::Seconds(5))).WillOnce(Return(Watched(running, 4)));
    // A long poll that ran out: same version, nothing printed.
    EXPECT_CALL(client_, Watch("j-3", 4, _)).WillOnce(Return(Watched(running, 4)));
    EXPECT_CALL(client_, Watch("j-3", 4, _))
        .WillOnce(Return(Watched(Judged(WithSteps(running, 200), v1::Verdict::PASS, 199), 5)));
    EXPECT_CALL(client_, Watch("j-3", 5, _))
        .WillOnce(Return(Watched(Finished(Judged(WithSteps(running, 300), v1::Verdict::PASS, 300),
                                          v1::JOB_STATE_SUCCEEDED),
                                 6)));
  }
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("2023-11-14 22:13:20.000 UTC  QUEUED: submitted\n"));
  EXPECT_THAT(text, HasSubstr("step 120/? | epoch 1 | loss 0.4321 | step 12.3 ms | comm 4.5 ms\n"));
  EXPECT_THAT(text, HasSubstr("epoch 1: test accuracy 0.8123"));
  EXPECT_THAT(text, HasSubstr("epoch 2: test accuracy 0.8456"));
  EXPECT_THAT(text, HasSubstr("SUCCEEDED: all ranks finished"));
  EXPECT_THAT(text, HasSubstr("verdict\n"
                              "  state           SUCCEEDED\n"
                              "  final accuracy  0.8456 (epoch 2)\n"
                              "  first bad step  none\n"
                              "  last step       300\n"
                              "    RANK  LOSS    LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
                              "    0     0.4321  2.5         1.75         0      12.5\n"
                              "    1     0.4321  3.5         1.75         0      12.5\n"
                              "  alarms          none\n"
                              "result: PASS (300 steps judged, 2560 train samples/s)\n"));
  EXPECT_THAT(text, Not(HasSubstr("alarm:")));
  EXPECT_THAT(text, Not(HasSubstr("\r")));  // not a terminal
}

TEST_F(CommandsTest, WatchSaysWhyAQueuedJobWaitsOnceAndAgainWhenTheReasonChanges) {
  const v1::JobStatus queued = QueuedJob();
  v1::JobStatus still_waiting = queued;  // a new version for another reason, same wait
  still_waiting.set_generation(1);
  v1::JobStatus other_reason = queued;
  const std::string busy =
      "waiting for 3 idle workers: 2 of 3 suitable workers are idle (the others run jobs)";
  other_reason.set_queued_reason(busy);
  v1::JobStatus running = queued;
  running.set_state(v1::JOB_STATE_RUNNING);
  running.clear_queued_reason();
  v1::StateTransition* placed = running.add_transitions();
  placed->set_state(v1::JOB_STATE_RUNNING);
  placed->set_time_unix_ms(1'700'000'060'000);
  placed->set_reason("all ranks joined");
  {
    InSequence order;
    EXPECT_CALL(client_, Watch("j-4", 0, _)).WillOnce(Return(Watched(queued, 1)));
    EXPECT_CALL(client_, Watch("j-4", 1, _)).WillOnce(Return(Watched(queued, 1)));  // ran out
    EXPECT_CALL(client_, Watch("j-4", 1, _)).WillOnce(Return(Watched(still_waiting, 2)));
    EXPECT_CALL(client_, Watch("j-4", 2, _)).WillOnce(Return(Watched(other_reason, 3)));
    EXPECT_CALL(client_, Watch("j-4", 3, _)).WillOnce(Return(Watched(other_reason, 4)));
    EXPECT_CALL(client_, Watch("j-4", 4, _)).WillOnce(Return(Watched(running, 5)));
    EXPECT_CALL(client_, Watch("j-4", 5, _))
        .WillOnce(Return(Watched(
            Finished(Judged(running, v1::Verdict::PASS, 300), v1::JOB_STATE_SUCCEEDED), 6)));
  }
  EXPECT_EQ(RunWatch("j-4", WatchOptions(), client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("2023-11-14 22:14:10.000 UTC  QUEUED: submitted\n"
                                           "waiting: ",
                                           kTooFewWorkers, "\nwaiting: ", busy,
                                           "\n2023-11-14 22:14:20.000 UTC  RUNNING: all ranks "
                                           "joined\n")));
  // Each reason once, however many versions repeat it.
  EXPECT_EQ(text.find(absl::StrCat("waiting: ", kTooFewWorkers)),
            text.rfind(absl::StrCat("waiting: ", kTooFewWorkers)));
  EXPECT_EQ(text.find("waiting: " + busy), text.rfind("waiting: " + busy));
}

TEST_F(CommandsTest, WatchOfARunningJobSaysNothingOfWaiting) {
  v1::JobStatus running = RunningJob();
  running.set_queued_reason(kTooFewWorkers);  // not QUEUED: ignored
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(running, 1)))
      .WillOnce(Return(Watched(
          Finished(Judged(running, v1::Verdict::PASS, 300), v1::JOB_STATE_SUCCEEDED), 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), Not(HasSubstr("waiting")));
}

TEST_F(CommandsTest, WatchShowsAFailingAlarmAsRaisedAndTheFirstBadStepThenExitsOne) {
  // Rank 1 bypasses the gradient sync: its synced norm equals its local norm, unlike rank 0's.
  // The client does not judge that itself: only the coordinator's alarm and verdict count.
  v1::JobStatus running = Judged(WithSteps(RunningJob(), 3), v1::Verdict::FAIL, 3);
  const v1::Alarm alarm =
      MakeAlarm(v1::Alarm::NOT_SYNCHRONIZED, 3, 1, /*failed_job=*/true,
                "step 3: rank 1 was not synchronised (synced grad norm 3.5 = its local norm)");
  *running.add_alarms() = alarm;
  v1::Verdict* verdict = running.mutable_verdict();
  verdict->set_first_bad_step(3);
  *verdict->mutable_first_bad() = verdict->last();
  verdict->mutable_first_bad(1)->set_synced_grad_norm(3.5);
  verdict->mutable_first_bad(1)->set_has_drift(false);
  v1::JobStatus failed = running;
  failed.set_state(v1::JOB_STATE_FAILED);
  failed.add_transitions()->set_state(v1::JOB_STATE_FAILED);
  failed.mutable_transitions(1)->set_reason("check failed: NOT_SYNCHRONIZED: step 3: ...");
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(running, 1)))
      .WillOnce(Return(Watched(failed, 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("alarm: NOT_SYNCHRONIZED at step 3, rank 1: step 3: rank 1 was not "
                              "synchronised (synced grad norm 3.5 = its local norm)  [failed the "
                              "job]\n"));
  EXPECT_THAT(text, HasSubstr("FAILED: check failed: NOT_SYNCHRONIZED"));
  EXPECT_THAT(text, HasSubstr("  state           FAILED  [FAIL]\n"));
  EXPECT_THAT(text, HasSubstr("  first bad step  3\n"
                              "    RANK  LOSS    LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
                              "    0     0.4321  2.5         1.75         0      12.5\n"
                              "    1     0.4321  3.5         3.5          -      12.5\n"
                              "  last step       3\n"));
  EXPECT_THAT(text, HasSubstr("  alarms          1 (1 failed the job, 0 warnings)\n"));
  EXPECT_THAT(text, HasSubstr("result: FAIL (3 steps judged, first bad step 3, 2560 train "
                              "samples/s): the job ended FAILED\n"));
}

TEST_F(CommandsTest, WatchOfASucceededJobWithWarningsExitsZeroAndShowsThem) {
  v1::JobStatus done = Finished(Judged(WithSteps(RunningJob(), 300), v1::Verdict::WARN, 300),
                                v1::JOB_STATE_SUCCEEDED);
  v1::Alarm drift = MakeAlarm(v1::Alarm::DRIFT, 50, 1, /*failed_job=*/false,
                              "step 50: drift 3e-06 in fc2.weight > 1e-06");
  drift.set_tensor("fc2.weight");
  drift.set_repeats(25);
  drift.set_last_step(300);
  *done.add_alarms() = drift;
  v1::Verdict* verdict = done.mutable_verdict();
  verdict->set_first_bad_step(50);
  *verdict->mutable_first_bad() = verdict->last();
  verdict->mutable_first_bad(1)->set_drift(3e-6);
  EXPECT_CALL(client_, Watch("j-3", 0, _)).WillOnce(Return(Watched(done, 7)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("  state           SUCCEEDED\n"));
  EXPECT_THAT(text, HasSubstr("  first bad step  50\n"
                              "    RANK  LOSS    LOCAL_GRAD  SYNCED_GRAD  DRIFT  STEP_MS\n"
                              "    0     0.4321  2.5         1.75         0      12.5\n"
                              "    1     0.4321  3.5         1.75         3e-06  12.5\n"
                              "  last step       300\n"));
  EXPECT_THAT(text, HasSubstr("  alarms          1 (0 failed the job, 1 warning)\n"
                              "    DRIFT at step 50, rank 1, tensor fc2.weight: step 50: drift "
                              "3e-06 in fc2.weight > 1e-06 (+25 later steps, last at step 300)  "
                              "[warning]\n"));
  EXPECT_THAT(text, HasSubstr("result: WARN (300 steps judged, first bad step 50, 2560 train "
                              "samples/s): the job succeeded with 1 warning (see the alarms "
                              "above)\n"));
  // A watch that starts after the end lists the alarms once, in the verdict.
  EXPECT_THAT(text, Not(HasSubstr("alarm: ")));
}

TEST_F(CommandsTest, WatchOfAFailedJobExitsOneAndShowsRankErrors) {
  v1::JobStatus failed =
      Finished(Judged(RunningJob(), v1::Verdict::PASS, 120), v1::JOB_STATE_FAILED);
  failed.mutable_ranks(1)->set_error("fingerprint mismatch");
  EXPECT_CALL(client_, Watch("j-3", 0, _)).WillOnce(Return(Watched(failed, 9)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("rank 1 failed: fingerprint mismatch"));
  EXPECT_THAT(out_.str(), HasSubstr("state           FAILED  [FAIL]"));
  EXPECT_THAT(out_.str(), HasSubstr("result: PASS (120 steps judged, 2560 train samples/s): the "
                                    "job ended FAILED\n"));
}

TEST_F(CommandsTest, WatchOfASucceededJobTheCoordinatorNeverJudgedExitsOne) {
  v1::JobStatus done = Finished(RunningJob(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_CALL(client_, Watch("j-3", 0, _)).WillOnce(Return(Watched(done, 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("result: not judged yet (0 steps judged): the coordinator "
                                    "judged no step\n"));
}

TEST_F(CommandsTest, WatchShowsEachAlarmOnceAndAgainAfterANewAttempt) {
  v1::JobStatus running = Judged(RunningJob(), v1::Verdict::WARN, 120);
  *running.add_alarms() = MakeAlarm(v1::Alarm::STRAGGLER, 100, 0, false, "rank 0 is slow");
  v1::JobStatus repeated = running;
  repeated.mutable_alarms(0)->set_repeats(3);
  v1::JobStatus retried = running;
  retried.set_generation(3);
  v1::JobStatus done = Finished(running, v1::JOB_STATE_SUCCEEDED);
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(running, 1)))
      .WillOnce(Return(Watched(repeated, 2)))
      .WillOnce(Return(Watched(retried, 3)))
      .WillOnce(Return(Watched(done, 4)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitOk);
  const std::string line = "alarm: STRAGGLER at step 100, rank 0: rank 0 is slow  [warning]\n";
  const std::string text = out_.str();
  const size_t first = text.find(line);
  ASSERT_NE(first, std::string::npos);
  const size_t second = text.find(line, first + 1);
  ASSERT_NE(second, std::string::npos);  // generation 3
  EXPECT_EQ(text.find(line, second + 1), std::string::npos);
}

TEST_F(CommandsTest, WatchOnTerminalRewritesTheProgressLineWithTheVerdictSoFar) {
  env_.out_is_tty = true;
  const v1::JobStatus running = RunningJob();
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(running, 1)))
      .WillOnce(Return(Watched(Judged(WithSteps(running, 121), v1::Verdict::WARN, 121), 2)))
      .WillOnce(Return(Watched(Finished(running, v1::JOB_STATE_CANCELLED), 3)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 120/? | epoch 1 | loss 0.4321 | step 12.3 ms | comm "
                                    "4.5 ms\r"));
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 121/? | epoch 1 | loss 0.4321 | step 12.3 ms | comm "
                                    "4.5 ms | 2560 samples/s | WARN\n"));
  EXPECT_THAT(out_.str(), HasSubstr("CANCELLED"));
}

TEST_F(CommandsTest, WatchShowsTheTotalStepsTheRanksReport) {
  env_.out_is_tty = true;
  const v1::JobStatus running = RunningJob();
  v1::JobStatus stepping = WithSteps(running, 121);
  stepping.mutable_ranks(0)->mutable_last_step()->set_total_steps(4690);
  stepping.mutable_ranks(1)->mutable_last_step()->set_total_steps(4690);
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(stepping, 1)))
      .WillOnce(Return(Watched(Finished(running, v1::JOB_STATE_CANCELLED), 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 121/4690 | epoch 1"));
}

TEST_F(CommandsTest, WatchPacesPlainProgressLinesByTheClock) {
  WatchOptions options;
  options.plain_interval = absl::Seconds(5);
  v1::JobStatus running = RunningJob();
  running.mutable_spec()->set_max_steps(500);
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(WithSteps(running, 10), 1)))
      .WillOnce([&](const std::string&, uint64_t, absl::Duration) {
        clock_.Advance(absl::Seconds(1));  // too soon: not printed
        return Watched(WithSteps(running, 20), 2);
      })
      .WillOnce([&](const std::string&, uint64_t, absl::Duration) {
        clock_.Advance(absl::Seconds(5));
        return Watched(WithSteps(running, 30), 3);
      })
      .WillOnce(Return(Watched(
          Finished(Judged(WithSteps(running, 40), v1::Verdict::PASS, 40), v1::JOB_STATE_SUCCEEDED),
          4)));
  EXPECT_EQ(RunWatch("j-3", options, client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("step 10/500"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("step 20/500")));
  EXPECT_THAT(out_.str(), HasSubstr("step 30/500"));
}

TEST_F(CommandsTest, WatchRetriesUnavailableWithBackoffThenGivesUp) {
  WatchOptions options;
  options.max_retries = 3;
  const v1::JobStatus running = RunningJob();
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(Watched(running, 1)))  // resets the retry budget
      .WillOnce(Return(absl::DeadlineExceededError("deadline")))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(RunWatch("j-3", options, client_, env_), kExitUnreachable);
  EXPECT_EQ(sleeps_, (std::vector<absl::Duration>{absl::Milliseconds(500), absl::Milliseconds(500),
                                                  absl::Seconds(1), absl::Seconds(2)}));
  EXPECT_THAT(err_.str(), HasSubstr("error: cannot watch job j-3: connection refused"));
}

TEST_F(CommandsTest, WatchUnknownJobExitsOneWithoutRetry) {
  EXPECT_CALL(client_, Watch("j-9", 0, _)).WillOnce(Return(absl::NotFoundError("no job j-9")));
  EXPECT_EQ(RunWatch("j-9", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_THAT(err_.str(), HasSubstr("no job j-9 [NOT_FOUND]"));
}

TEST_F(CommandsTest, SubmitWithWatchFollowsTheNewJob) {
  SubmitOptions options;
  options.watch = true;
  EXPECT_CALL(client_, Submit(_)).WillOnce([](const v1::JobSpec& spec) {
    return Submitted("j-5", JobSpecFingerprint(spec));
  });
  v1::JobStatus done =
      Finished(Judged(RunningJob(), v1::Verdict::PASS, 121), v1::JOB_STATE_SUCCEEDED);
  EXPECT_CALL(client_, Watch("j-5", 0, _)).WillOnce(Return(Watched(done, 3)));
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), AllOf(HasSubstr("submitted job j-5"), HasSubstr("result: PASS")));
}

}  // namespace
}  // namespace ringleader
