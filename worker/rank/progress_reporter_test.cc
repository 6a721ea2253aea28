// ProgressReporter against a scripted coordinator client that can hold its ReportProgress
// calls (as a frozen coordinator would). No sleeps: batching runs on a FakeClock, and every
// wait is on a condition with a deadline; a watchdog fails a test that hangs.
#include "worker/rank/progress_reporter.h"
#include "worker/rank/rank_activity.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Generous limits for conditions that should hold almost at once (a loaded 2-core machine).
constexpr absl::Duration kPrompt = absl::Seconds(10);
// A held call gives up after this, so a broken test cannot hang on it.
constexpr absl::Duration kHoldLimit = absl::Seconds(30);

// Aborts the test binary (failing the test) if not destroyed within `limit`.
class Watchdog {
 public:
  explicit Watchdog(absl::Duration limit)
      : thread_([this, limit] {
          if (!done_.WaitForNotificationWithTimeout(limit)) {
            std::fprintf(stderr, "watchdog: the test hung\n");
            std::abort();
          }
        }) {}
  ~Watchdog() {
    done_.Notify();
    thread_.join();
  }

 private:
  absl::Notification done_;
  std::thread thread_;
};

using Answer = absl::StatusOr<v1::ReportProgressResponse>;

Answer Stop(const std::string& reason) {
  v1::ReportProgressResponse response;
  response.set_stop(true);
  response.set_stop_reason(reason);
  return response;
}

// Records every ReportProgress call; answers from a script, then OK. Hold() makes calls wait
// (after being recorded) until Release().
class ScriptedCoordinator : public CoordinatorClient {
 public:
  void Script(std::vector<Answer> answers) {
    absl::MutexLock lock(&mu_);
    script_.assign(answers.begin(), answers.end());
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Whether `n` calls have started within `timeout`.
  bool AwaitCalls(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return requests_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  std::vector<v1::ReportProgressRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  int cancel_all_calls() {
    absl::MutexLock lock(&mu_);
    return cancel_all_calls_;
  }

  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(
      const v1::ReportProgressRequest& request) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
    Answer answer = v1::ReportProgressResponse();
    if (!script_.empty()) {
      answer = script_.front();
      script_.pop_front();
    }
    if (!mu_.AwaitWithTimeout(absl::Condition(&open_), kHoldLimit)) {
      return absl::DeadlineExceededError("held past the test's limit");
    }
    return answer;
  }
  void CancelAll() override {
    absl::MutexLock lock(&mu_);
    ++cancel_all_calls_;
  }

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::WaitAssignmentResponse> WaitAssignment(
      const v1::WaitAssignmentRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::JoinJobResponse> JoinJob(const v1::JoinJobRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::KvSetResponse> KvSet(const v1::KvSetRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest&) override {
    return absl::UnimplementedError("not used");
  }
  absl::StatusOr<v1::FinishRankResponse> FinishRank(const v1::FinishRankRequest&) override {
    return absl::UnimplementedError("not used");
  }

 private:
  absl::Mutex mu_;
  std::deque<Answer> script_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<v1::ReportProgressRequest> requests_ ABSL_GUARDED_BY(mu_);
  int cancel_all_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::StepReport Step(uint64_t n) {
  v1::StepReport report;
  report.set_step(n);
  return report;
}

v1::EpochReport Epoch(uint32_t n) {
  v1::EpochReport report;
  report.set_epoch(n);
  report.set_test_accuracy(0.5 + 0.1 * n);
  return report;
}

std::vector<uint64_t> StepsOf(const v1::ReportProgressRequest& request) {
  std::vector<uint64_t> steps;
  for (const auto& s : request.steps()) steps.push_back(s.step());
  return steps;
}

std::vector<uint32_t> EpochsOf(const v1::ReportProgressRequest& request) {
  std::vector<uint32_t> epochs;
  for (const auto& e : request.epochs()) epochs.push_back(e.epoch());
  return epochs;
}

class ProgressReporterTest : public ::testing::Test {
 protected:
  ProgressReporterTest() : watchdog_(absl::Seconds(60)) {
    // An interval the sender's own timer never reaches during a test (real time), so only
    // appends and flushes wake it unless a test shortens it.
    options_.max_interval = absl::Hours(1);
    options_.max_steps = 3;
    options_.max_batch_steps = 3;  // batches of exactly max_steps unless a test says otherwise
    options_.max_pending_steps = 4;
    options_.clock = &clock_;
    options_.log = [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      logs_.push_back(line);
    };
    options_.on_attempt_done = [this](const absl::Status&) {
      absl::MutexLock lock(&mu_);
      ++attempts_done_;
    };
  }

  std::unique_ptr<ProgressReporter> MakeReporter() {
    return std::make_unique<ProgressReporter>(&client_, "job", 2, 1, options_);
  }
  // Whether `n` attempts have had their results recorded within kPrompt.
  bool AwaitAttemptsDone(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return attempts_done_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPrompt);
  }
  std::vector<std::string> logs() {
    absl::MutexLock lock(&mu_);
    return logs_;
  }

  Watchdog watchdog_;
  FakeClock clock_;
  ScriptedCoordinator client_;
  ProgressReporterOptions options_;
  absl::Mutex mu_;
  std::vector<std::string> logs_ ABSL_GUARDED_BY(mu_);
  int attempts_done_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(ProgressReporterTest, AppendsNeverWaitWhileReportProgressIsHeld) {
  options_.max_pending_steps = 2000;
  options_.max_batch_steps = 5;  // the backlog goes out in batches bigger than max_steps
  auto reporter = MakeReporter();
  client_.Hold();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));  // the batch [1, 2, 3] is now stuck in flight

  absl::Notification appended;
  bool all_ok = true;
  std::thread training([&] {
    for (uint64_t s = 4; s <= 1003; ++s) all_ok = reporter->AddStep(Step(s)).ok() && all_ok;
    all_ok = reporter->AddEpoch(Epoch(0)).ok() && all_ok;
    appended.Notify();
  });
  const bool returned = appended.WaitForNotificationWithTimeout(kPrompt);
  EXPECT_TRUE(returned) << "appends waited for the held ReportProgress call";
  EXPECT_EQ(client_.requests().size(), 1u) << "one call in flight at a time";
  client_.Release();
  training.join();
  EXPECT_TRUE(all_ok);

  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  std::vector<uint64_t> delivered;
  std::vector<uint32_t> epochs;
  int max_batch = 0;
  for (const v1::ReportProgressRequest& request : client_.requests()) {
    EXPECT_LE(request.steps_size(), 5) << "a batch carries at most max_batch_steps steps";
    max_batch = std::max(max_batch, request.steps_size());
    for (uint64_t s : StepsOf(request)) delivered.push_back(s);
    for (uint32_t e : EpochsOf(request)) epochs.push_back(e);
  }
  ASSERT_EQ(delivered.size(), 1003u);
  EXPECT_EQ(max_batch, 5) << "a backlog goes out in batches of max_batch_steps, not max_steps";
  for (size_t i = 0; i < delivered.size(); ++i) ASSERT_EQ(delivered[i], i + 1);
  EXPECT_THAT(epochs, ElementsAre(0u));
  EXPECT_EQ(reporter->dropped_steps(), 0);
}

TEST_F(ProgressReporterTest, SendsABatchEveryMaxStepsAndFlushSendsTheRest) {
  auto reporter = MakeReporter();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(1));
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_THAT(StepsOf(sent[0]), ElementsAre(1u, 2u, 3u));
  EXPECT_EQ(sent[0].job_id(), "job");
  EXPECT_EQ(sent[0].generation(), 2u);
  EXPECT_EQ(sent[0].rank(), 1u);

  for (uint64_t s = 4; s <= 5; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  sent = client_.requests();
  ASSERT_EQ(sent.size(), 2u) << "steps 4 and 5 were not due on their own";
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(4u, 5u));
  EXPECT_EQ(reporter->batches_sent(), 2);

  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  EXPECT_EQ(client_.requests().size(), 2u) << "an empty batch is not sent";
}

TEST_F(ProgressReporterTest, TheSenderSendsQueuedStepsOnceMaxIntervalHasPassed) {
  options_.max_interval = absl::Milliseconds(200);  // the sender re-checks at this real pace
  auto reporter = MakeReporter();
  for (uint64_t s = 1; s <= 2; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  clock_.Advance(absl::Milliseconds(200));
  // No append after the advance: the sender's own wake-up finds the batch due.
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));
  EXPECT_THAT(StepsOf(client_.requests()[0]), ElementsAre(1u, 2u));
}

TEST_F(ProgressReporterTest, AStepQueuedAfterMaxIntervalGoesOutWithoutWaitingForTheTimer) {
  auto reporter = MakeReporter();  // max_interval 1 h: the sender's own timer cannot fire
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));
  EXPECT_THAT(StepsOf(client_.requests()[0]), ElementsAre(1u));
}

TEST_F(ProgressReporterTest, EpochsGoOutAtOnceInOrderAndAreNeverDropped) {
  client_.Script({absl::UnavailableError("down")});
  auto reporter = MakeReporter();  // max_pending_steps 4
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  ASSERT_TRUE(reporter->AddEpoch(Epoch(0)).ok());  // due at once, with step 1
  ASSERT_TRUE(AwaitAttemptsDone(1));
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_THAT(StepsOf(sent[0]), ElementsAre(1u));
  EXPECT_THAT(EpochsOf(sent[0]), ElementsAre(0u));

  // Backing off: steps alone are not due; six more overflow the queue of four.
  for (uint64_t s = 2; s <= 7; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  // A new epoch forces one attempt even while backing off.
  ASSERT_TRUE(reporter->AddEpoch(Epoch(1)).ok());
  // Delivered: the rest (with epoch 1) is due at once, so wait for both attempts.
  ASSERT_TRUE(AwaitAttemptsDone(3));
  sent = client_.requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(4u, 5u, 6u)) << "steps 1-3 were dropped";
  EXPECT_THAT(EpochsOf(sent[1]), ElementsAre(0u)) << "epoch 0 was queued before step 4";
  EXPECT_THAT(StepsOf(sent[2]), ElementsAre(7u));
  EXPECT_THAT(EpochsOf(sent[2]), ElementsAre(1u));
  EXPECT_EQ(reporter->dropped_steps(), 3);
  EXPECT_EQ(sent[1].epochs(0).test_accuracy(), Epoch(0).test_accuracy());
}

TEST_F(ProgressReporterTest, StopInAnAnswerIsSeenByTheNextAppend) {
  client_.Script({Stop("job job is FAILED: rank 0 failed")});
  auto reporter = MakeReporter();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(1));
  EXPECT_TRUE(reporter->stopped_by_coordinator());
  const absl::Status stopped = reporter->AddStep(Step(4));
  EXPECT_EQ(stopped.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(stopped.message()),
              HasSubstr("stopped by the coordinator: job job is FAILED: rank 0 failed"));
  EXPECT_EQ(FailureOf(stopped).kind(), v1::RankFailure::STOPPED);
  EXPECT_EQ(reporter->AddEpoch(Epoch(0)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(reporter->Flush(kPrompt).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(client_.requests().size(), 1u) << "nothing is sent after a stop";
}

TEST_F(ProgressReporterTest, StopWithoutAReasonSaysTheAttemptIsOver) {
  client_.Script({Stop("")});
  auto reporter = MakeReporter();
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  const absl::Status flushed = reporter->Flush(kPrompt);
  EXPECT_EQ(flushed.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(flushed.message()), HasSubstr("the attempt is over"));
}

TEST_F(ProgressReporterTest, UnavailableKeepsOrderRetriesAtTheIntervalAndLogsTheDrops) {
  client_.Script({absl::UnavailableError("down")});
  auto reporter = MakeReporter();  // max_steps 3, max_pending_steps 4
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(1));  // failed; [1, 2, 3] kept
  // Not due at every step while backing off: 4 and 5 wait (1 is dropped, 2 with step 6).
  for (uint64_t s = 4; s <= 5; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(reporter->AddStep(Step(6)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(2));
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_THAT(StepsOf(sent[0]), ElementsAre(1u, 2u, 3u));
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(3u, 4u, 5u));
  EXPECT_EQ(reporter->dropped_steps(), 2);
  std::vector<std::string> lines = logs();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), HasSubstr("2 step reports were dropped"));
  EXPECT_THAT(lines.back(), HasSubstr("rank 1"));
  // Back to the step pace after a success: 6 is queued, 7 and 8 make a batch.
  for (uint64_t s = 7; s <= 8; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(3));
  EXPECT_THAT(StepsOf(client_.requests()[2]), ElementsAre(6u, 7u, 8u));
  EXPECT_TRUE(reporter->status().ok());
}

TEST_F(ProgressReporterTest, DeadlineExceededIsRetriedLikeUnavailable) {
  client_.Script({absl::DeadlineExceededError("slow coordinator")});
  auto reporter = MakeReporter();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(1));
  EXPECT_TRUE(reporter->status().ok());
  ASSERT_TRUE(reporter->AddStep(Step(4)).ok());
  ASSERT_TRUE(reporter->Flush(kPrompt).ok());  // forces the retry despite backing off
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(1u, 2u, 3u));
  EXPECT_THAT(StepsOf(sent[2]), ElementsAre(4u));
}

TEST_F(ProgressReporterTest, FlushReportsUnavailableAndKeepsTheReports) {
  client_.Script({absl::UnavailableError("down")});
  auto reporter = MakeReporter();
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  EXPECT_EQ(reporter->Flush(kPrompt).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(1u));
}

// The coordinator's per-rank rate limit (--max_reports_per_second) refuses a call without
// recording it: the batch is kept, in order, and delivered by the next try.
TEST_F(ProgressReporterTest, ResourceExhaustedKeepsTheBatchAndTheNextTryDeliversIt) {
  client_.Script({absl::ResourceExhaustedError(
      "ReportProgress: rank 1 of job (generation 2) is over its limit of 200 calls per second")});
  options_.max_pending_steps = 10;
  auto reporter = MakeReporter();  // max_steps 3
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(1));  // refused; [1, 2, 3] kept
  EXPECT_TRUE(reporter->status().ok()) << "a refusal over the rate limit ends nothing";
  EXPECT_EQ(reporter->batches_sent(), 0);
  // Backing off: a step does not make a batch due before the interval has passed.
  ASSERT_TRUE(reporter->AddStep(Step(4)).ok());
  EXPECT_EQ(client_.requests().size(), 1u);
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(reporter->AddStep(Step(5)).ok());
  ASSERT_TRUE(AwaitAttemptsDone(2));
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_THAT(StepsOf(sent[0]), ElementsAre(1u, 2u, 3u));
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(1u, 2u, 3u)) << "the refused batch, again";
  EXPECT_EQ(reporter->batches_sent(), 1);
  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  EXPECT_THAT(StepsOf(client_.requests()[2]), ElementsAre(4u, 5u));
  EXPECT_EQ(reporter->dropped_steps(), 0);
  std::vector<std::string> lines = logs();
  ASSERT_THAT(lines, testing::SizeIs(1));
  EXPECT_THAT(lines[0], HasSubstr("rank 1: the coordinator refused a progress report"));
  EXPECT_THAT(lines[0], HasSubstr("RESOURCE_EXHAUSTED"));
}

TEST_F(ProgressReporterTest, FlushWaitsThroughARateLimitRefusalInsteadOfFailing) {
  options_.max_interval = absl::Milliseconds(20);  // the sender re-checks at this real pace
  client_.Script({absl::ResourceExhaustedError("over the limit"),
                  absl::ResourceExhaustedError("over the limit")});
  auto reporter = MakeReporter();
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  ASSERT_TRUE(reporter->AddEpoch(Epoch(0)).ok());
  absl::Status flushed = absl::UnknownError("not returned");
  std::thread flusher([&] { flushed = reporter->Flush(kPrompt); });
  ASSERT_TRUE(AwaitAttemptsDone(1));
  // Each retry waits for the interval on the (fake) clock; the flush waits meanwhile.
  clock_.Advance(absl::Milliseconds(20));
  ASSERT_TRUE(AwaitAttemptsDone(2));
  clock_.Advance(absl::Milliseconds(20));
  flusher.join();
  EXPECT_TRUE(flushed.ok()) << flushed;
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 3u);
  for (const v1::ReportProgressRequest& request : sent) {
    EXPECT_THAT(StepsOf(request), ElementsAre(1u));
    EXPECT_THAT(EpochsOf(request), ElementsAre(0u));
  }
  EXPECT_EQ(reporter->batches_sent(), 1);
}

TEST_F(ProgressReporterTest, FlushTimesOutWhileTheCoordinatorHoldsTheCall) {
  auto reporter = MakeReporter();
  client_.Hold();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));
  ASSERT_TRUE(reporter->AddStep(Step(4)).ok());
  ASSERT_TRUE(reporter->AddEpoch(Epoch(0)).ok());
  const absl::Status flushed = reporter->Flush(absl::Milliseconds(50));
  EXPECT_EQ(flushed.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(flushed.message()), HasSubstr("still unanswered"));
  client_.Release();
  ASSERT_TRUE(reporter->Flush(kPrompt).ok());
  std::vector<v1::ReportProgressRequest> sent = client_.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_THAT(StepsOf(sent[1]), ElementsAre(4u));
  EXPECT_THAT(EpochsOf(sent[1]), ElementsAre(0u));
}

TEST_F(ProgressReporterTest, OtherErrorsEndReporting) {
  client_.Script({absl::FailedPreconditionError("stale generation")});
  auto reporter = MakeReporter();
  ASSERT_TRUE(reporter->AddStep(Step(1)).ok());
  EXPECT_EQ(reporter->Flush(kPrompt).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reporter->AddStep(Step(2)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(reporter->stopped_by_coordinator());
  EXPECT_EQ(client_.requests().size(), 1u);
}

// The reporter never cancels the shared client: the destructor waits for the call in flight,
// which the real client bounds with its call deadline (here: the test releases it).
TEST_F(ProgressReporterTest, DestructorReturnsOnceTheCallInFlightEndsAndNeverCancelsTheClient) {
  auto reporter = MakeReporter();
  client_.Hold();
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));
  for (uint64_t s = 4; s <= 9; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());
  absl::Notification destroyed;
  std::thread destroyer([&] {
    reporter.reset();
    destroyed.Notify();
  });
  client_.Release();  // the call in flight ends, as the client's deadline would end it
  EXPECT_TRUE(destroyed.WaitForNotificationWithTimeout(kPrompt));
  destroyer.join();
  EXPECT_EQ(client_.cancel_all_calls(), 0);
}

TEST_F(ProgressReporterTest, AnIdleSenderSendsEmptyKeepalivesAndTheirStopIsSeen) {
  options_.keepalive_interval = absl::Milliseconds(5);
  client_.Script({v1::ReportProgressResponse(), v1::ReportProgressResponse(), Stop("over")});
  auto reporter = MakeReporter();
  // Nothing is ever appended: the three calls are keepalives carrying no reports.
  ASSERT_TRUE(client_.AwaitCalls(3, kPrompt));
  ASSERT_TRUE(AwaitAttemptsDone(3));
  for (const v1::ReportProgressRequest& request : client_.requests()) {
    EXPECT_EQ(request.job_id(), "job");
    EXPECT_EQ(request.rank(), 1u);
    EXPECT_EQ(request.steps_size(), 0);
    EXPECT_EQ(request.epochs_size(), 0);
  }
  // The third keepalive's answer said stop: the loop sees it at its next step.
  EXPECT_EQ(reporter->AddStep(Step(1)).code(), absl::StatusCode::kAborted);
}

TEST_F(ProgressReporterTest, EveryCallCarriesTheRanksCurrentActivity) {
  options_.keepalive_interval = absl::Milliseconds(5);
  FakeClock clock;
  RankActivityTracker activity(&clock);
  activity.Set(v1::RANK_PHASE_CONNECTING, "connecting to rank 0 at 10.1.0.2:41729");
  clock.Advance(absl::Milliseconds(1500));
  options_.activity = [&activity] { return activity.Current(); };
  client_.Script({v1::ReportProgressResponse(), v1::ReportProgressResponse()});
  auto reporter = MakeReporter();
  ASSERT_TRUE(client_.AwaitCalls(1, kPrompt));
  const v1::ReportProgressRequest keepalive = client_.requests()[0];
  EXPECT_EQ(keepalive.activity().phase(), v1::RANK_PHASE_CONNECTING);
  EXPECT_EQ(keepalive.activity().detail(), "connecting to rank 0 at 10.1.0.2:41729");
  EXPECT_EQ(keepalive.activity().phase_elapsed_ms(), 1500u);
}

TEST_F(ProgressReporterTest, AnAnswerAskingForTheTraceGetsItInTheNextCallAtOnce) {
  // No keepalives and no steps: only the request for the ring makes the second call.
  int rings = 0;
  options_.trace = [&rings] {
    ++rings;
    v1::CollectiveTraceEntry entry;
    entry.set_sequence(41);
    entry.set_state(v1::CollectiveTraceEntry::STARTED);
    return std::vector<v1::CollectiveTraceEntry>{entry};
  };
  v1::ReportProgressResponse ask;
  ask.set_send_trace(true);
  client_.Script({ask, v1::ReportProgressResponse()});
  auto reporter = MakeReporter();
  ASSERT_TRUE(reporter->AddEpoch(Epoch(1)).ok());  // an epoch goes out at once
  ASSERT_TRUE(client_.AwaitCalls(2, kPrompt));
  ASSERT_TRUE(AwaitAttemptsDone(2));
  const std::vector<v1::ReportProgressRequest> requests = client_.requests();
  EXPECT_FALSE(requests[0].has_trace());
  EXPECT_TRUE(requests[1].has_trace());
  ASSERT_EQ(requests[1].trace_size(), 1);
  EXPECT_EQ(requests[1].trace(0).sequence(), 41u);
  EXPECT_EQ(rings, 1);  // asked once, sent once
}

TEST(RankActivityTrackerTest, APhaseRestartsItsTimeAndADetailChangeDoesNot) {
  FakeClock clock;
  RankActivityTracker activity(&clock);
  EXPECT_EQ(activity.Current().phase(), v1::RANK_PHASE_UNSPECIFIED);
  activity.Set(v1::RANK_PHASE_TRAINING, "step 1");
  clock.Advance(absl::Milliseconds(300));
  activity.SetDetail("step 2");
  clock.Advance(absl::Milliseconds(200));
  EXPECT_EQ(activity.Current().detail(), "step 2");
  EXPECT_EQ(activity.Current().phase_elapsed_ms(), 500u);
  activity.Set(v1::RANK_PHASE_EVALUATING, "epoch 1");
  EXPECT_EQ(activity.phase(), v1::RANK_PHASE_EVALUATING);
  EXPECT_EQ(activity.Current().phase_elapsed_ms(), 0u);
}

TEST_F(ProgressReporterTest, DestructorSendsNothingQueuedAndLogsWhatItLeaves) {
  auto reporter = MakeReporter();
  for (uint64_t s = 1; s <= 2; ++s) ASSERT_TRUE(reporter->AddStep(Step(s)).ok());  // not due
  reporter.reset();
  EXPECT_TRUE(client_.requests().empty());
  std::vector<std::string> lines = logs();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("2 step and 0 epoch reports undelivered"));
}

}  // namespace
}  // namespace ringleader
