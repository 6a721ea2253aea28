// The sender thread and the queue it shares with the training thread: see progress_reporter.h.
#include "worker/rank/progress_reporter.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rank_failure.h"

namespace ringleader {

// A repeat of the batch is harmless (the coordinator keeps the last step and replaces an
// epoch's report), so on these the batch is kept and retried at the interval.
bool IsTransient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

// The coordinator refuses a rank's calls beyond its rate limit (RESOURCE_EXHAUSTED) without
// recording anything: the batch is kept and sent again once the bucket has refilled.
bool IsRetriedReportError(const absl::Status& status) {
  return IsTransient(status) || status.code() == absl::StatusCode::kResourceExhausted;
}

namespace {

absl::Status StopStatus(const v1::ReportProgressResponse& response) {
  return WithFailureKind(
      absl::AbortedError(absl::StrCat(
          "stopped by the coordinator: ",
          response.stop_reason().empty() ? "the attempt is over" : response.stop_reason())),
      v1::RankFailure::STOPPED);
}

}  // namespace

ProgressReporter::ProgressReporter(CoordinatorClient* client, std::string job_id,
                                   uint64_t generation, uint32_t rank,
                                   ProgressReporterOptions options)
    : client_(client),
      job_id_(std::move(job_id)),
      generation_(generation),
      rank_(rank),
      options_(std::move(options)),
      max_interval_(std::max(options_.max_interval, absl::Milliseconds(1))),
      max_steps_(static_cast<size_t>(std::max(1, options_.max_steps))),
      max_batch_steps_(
          std::max(max_steps_, static_cast<size_t>(std::max(0, options_.max_batch_steps)))),
      max_pending_steps_(static_cast<size_t>(std::max(1, options_.max_pending_steps))),
      clock_(options_.clock ? options_.clock : Clock::Real()),
      last_attempt_(clock_->Now()) {
  sender_ = std::thread([this] { SenderLoop(); });
}

ProgressReporter::~ProgressReporter() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    wake_.Signal();
  }
  // Waits for a call in flight only: bounded by the client's call deadline.
  sender_.join();
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    const int64_t dropped = dropped_steps_ - dropped_logged_;
    if (terminal_.ok() && (!steps_.empty() || !epochs_.empty() || dropped > 0)) {
      line = absl::StrFormat(
          "rank %d: progress reporter stopped with %d step and %d epoch reports undelivered; %d "
          "step reports were dropped (oldest first) since the coordinator last answered",
          rank_, steps_.size(), epochs_.size(), dropped);
    }
  }
  if (!line.empty()) Log(line);
}

absl::Status ProgressReporter::AddStep(const v1::StepReport& report) {
  QueuedStep item{0, report};  // the copy is made before taking the lock
  absl::MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  // An idle sender waits without a timeout; the first report of a batch makes it start timing
  // the interval.
  const bool was_empty = steps_.empty() && epochs_.empty();
  item.seq = next_seq_++;
  steps_.push_back(std::move(item));
  DropOverflowLocked();
  if (was_empty || BatchDueLocked()) wake_.Signal();
  return absl::OkStatus();
}

absl::Status ProgressReporter::AddEpoch(const v1::EpochReport& report) {
  QueuedEpoch item{0, report};
  absl::MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  item.seq = next_seq_++;
  epochs_.push_back(std::move(item));
  epoch_untried_ = true;
  wake_.Signal();
  return absl::OkStatus();
}

absl::Status ProgressReporter::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  const uint64_t target = next_seq_;  // everything appended so far
  if (OldestUndeliveredLocked() >= target) return absl::OkStatus();
  flushing_ = true;
  flush_target_ = target;
  flush_first_attempt_ = attempts_started_ + 1;
  flush_error_ = absl::OkStatus();
  wake_.Signal();
  // absl::Mutex evaluates the condition with mu_ held.
  auto settled = [this, target]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return OldestUndeliveredLocked() >= target || !terminal_.ok() || !flush_error_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&settled), timeout);
  flushing_ = false;
  if (!terminal_.ok()) return terminal_;
  if (OldestUndeliveredLocked() >= target) return absl::OkStatus();
  if (!flush_error_.ok()) return flush_error_;
  return absl::DeadlineExceededError(absl::StrFormat(
      "progress reports not delivered within %s (%d step and %d epoch reports queued%s)",
      absl::FormatDuration(timeout), steps_.size(), epochs_.size(),
      in_flight_oldest_ != kNone ? ", a ReportProgress call still unanswered" : ""));
}

absl::Status ProgressReporter::status() const {
  absl::MutexLock lock(&mu_);
  return terminal_;
}

bool ProgressReporter::stopped_by_coordinator() const {
  absl::MutexLock lock(&mu_);
  return stopped_by_coordinator_;
}

int ProgressReporter::batches_sent() const {
  absl::MutexLock lock(&mu_);
  return batches_sent_;
}

int64_t ProgressReporter::dropped_steps() const {
  absl::MutexLock lock(&mu_);
  return dropped_steps_;
}

void ProgressReporter::SenderLoop() {
  for (;;) {
    Batch batch;
    int64_t attempt = 0;
    bool send_trace = false;
    {
      absl::MutexLock lock(&mu_);
      bool keepalive = false;
      while (!shutting_down_ && terminal_.ok() && !BatchDueLocked() && !trace_wanted_) {
        if (steps_.empty() && epochs_.empty()) {
          if (options_.keepalive_interval <= absl::ZeroDuration()) {
            wake_.Wait(&mu_);
          } else if (wake_.WaitWithTimeout(&mu_, options_.keepalive_interval) &&
                     steps_.empty() && epochs_.empty()) {
            keepalive = true;  // idle for a whole interval: send an empty report
            break;
          }
        } else {
          // Real-time wait for what the injected clock says is left; re-checked on waking.
          wake_.WaitWithTimeout(&mu_, TimeUntilIntervalLocked());
        }
      }
      if (shutting_down_ || !terminal_.ok()) return;
      if (!keepalive) batch = TakeBatchLocked();
      attempt = ++attempts_started_;
      send_trace = trace_wanted_;
      trace_wanted_ = false;
    }

    v1::ReportProgressRequest request;
    request.set_job_id(job_id_);
    request.set_generation(generation_);
    request.set_rank(rank_);
    for (const QueuedStep& step : batch.steps) *request.add_steps() = step.report;
    for (const QueuedEpoch& epoch : batch.epochs) *request.add_epochs() = epoch.report;
    if (options_.activity) *request.mutable_activity() = options_.activity();
    if (send_trace) {
      request.set_has_trace(true);
      for (v1::CollectiveTraceEntry& e : options_.trace()) *request.add_trace() = std::move(e);
    }
    const absl::StatusOr<v1::ReportProgressResponse> answer = client_->ReportProgress(request);

    std::vector<std::string> logs;
    {
      absl::MutexLock lock(&mu_);
      RecordLocked(answer, attempt, std::move(batch), &logs);
    }
    for (const std::string& line : logs) Log(line);
    if (options_.on_attempt_done) options_.on_attempt_done(answer.status());
  }
}

bool ProgressReporter::BatchDueLocked() const {
  if (steps_.empty() && epochs_.empty()) return false;
  // A flush forces one attempt even while backing off; once an attempt made for it failed,
  // the flush is answered and the pace is the interval again.
  if (flushing_ &&
      std::min(steps_.empty() ? kNone : steps_.front().seq,
               epochs_.empty() ? kNone : epochs_.front().seq) < flush_target_ &&
      (!backing_off_ || attempts_started_ < flush_first_attempt_)) {
    return true;
  }
  // Epochs go out at once; while backing off only a newly queued one forces an attempt.
  if (!epochs_.empty() && (!backing_off_ || epoch_untried_)) return true;
  if (!backing_off_ && steps_.size() >= max_steps_) return true;
  return clock_->Now() - last_attempt_ >= max_interval_;
}

absl::Duration ProgressReporter::TimeUntilIntervalLocked() const {
  const absl::Duration left = max_interval_ - (clock_->Now() - last_attempt_);
  return std::max(left, absl::Milliseconds(1));
}

ProgressReporter::Batch ProgressReporter::TakeBatchLocked() {
  Batch batch;
  while (!steps_.empty() && batch.steps.size() < max_batch_steps_) {
    batch.steps.push_back(std::move(steps_.front()));
    steps_.pop_front();
  }
  // The epochs queued among (or before) those steps: the batch is the queue's oldest part.
  const uint64_t first_step_left = steps_.empty() ? kNone : steps_.front().seq;
  while (!epochs_.empty() && epochs_.front().seq < first_step_left) {
    batch.epochs.push_back(std::move(epochs_.front()));
    epochs_.pop_front();
  }
  in_flight_oldest_ = std::min(batch.steps.empty() ? kNone : batch.steps.front().seq,
                               batch.epochs.empty() ? kNone : batch.epochs.front().seq);
  epoch_untried_ = false;
  // The interval restarts even if this attempt fails: an unreachable coordinator is retried
  // at the reporting pace, not at every step.
  last_attempt_ = clock_->Now();
  return batch;
}

void ProgressReporter::RecordLocked(const absl::StatusOr<v1::ReportProgressResponse>& answer,
                                    int64_t attempt, Batch batch, std::vector<std::string>* logs) {
  in_flight_oldest_ = kNone;
  if (answer.ok()) {
    ++batches_sent_;
    backing_off_ = false;
    if (dropped_steps_ > dropped_logged_) {
      logs->push_back(absl::StrFormat(
          "rank %d: the coordinator answers again; %d step reports were dropped (oldest first) "
          "while it did not (%d in all)",
          rank_, dropped_steps_ - dropped_logged_, dropped_steps_));
      dropped_logged_ = dropped_steps_;
    }
    drop_streak_logged_ = false;
    rate_limit_logged_ = false;
    // The coordinator wants the trace ring: the sender goes round again at once.
    if (answer->send_trace() && options_.trace) trace_wanted_ = true;
    if (answer->stop()) {
      stopped_by_coordinator_ = true;
      EndLocked(StopStatus(*answer));
    }
    return;
  }
  if (!IsRetriedReportError(answer.status())) {
    EndLocked(answer.status());
    return;
  }
  const bool rate_limited = answer.status().code() == absl::StatusCode::kResourceExhausted;
  // Back to the head of the queue, in order; the newest reports queued meanwhile stay behind.
  for (auto it = batch.steps.rbegin(); it != batch.steps.rend(); ++it) {
    steps_.push_front(std::move(*it));
  }
  for (auto it = batch.epochs.rbegin(); it != batch.epochs.rend(); ++it) {
    epochs_.push_front(std::move(*it));
  }
  DropOverflowLocked();
  backing_off_ = true;
  // A refusal over the rate limit is no reason to give up a flush: it waits for the retry.
  if (flushing_ && attempt >= flush_first_attempt_ && flush_error_.ok() && !rate_limited) {
    flush_error_ = answer.status();
  }
  if (rate_limited && !rate_limit_logged_) {
    logs->push_back(absl::StrFormat(
        "rank %d: the coordinator refused a progress report (%s); keeping the reports and "
        "retrying every %s",
        rank_, answer.status().ToString(), absl::FormatDuration(max_interval_)));
    rate_limit_logged_ = true;
  }
  if (dropped_steps_ > dropped_logged_ && !drop_streak_logged_) {
    logs->push_back(absl::StrFormat(
        "rank %d: progress reports are not getting through (%s); the queue is full at %d step "
        "reports, dropping the oldest until the coordinator answers",
        rank_, answer.status().ToString(), max_pending_steps_));
    drop_streak_logged_ = true;
  }
}

void ProgressReporter::EndLocked(absl::Status terminal) {
  terminal_ = std::move(terminal);
  // Nobody will deliver them: the attempt is over for the coordinator.
  steps_.clear();
  epochs_.clear();
}

void ProgressReporter::DropOverflowLocked() {
  while (steps_.size() > max_pending_steps_) {
    steps_.pop_front();
    ++dropped_steps_;
  }
}

uint64_t ProgressReporter::OldestUndeliveredLocked() const {
  uint64_t oldest = in_flight_oldest_;
  if (!steps_.empty()) oldest = std::min(oldest, steps_.front().seq);
  if (!epochs_.empty()) oldest = std::min(oldest, epochs_.front().seq);
  return oldest;
}

void ProgressReporter::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "[ringleader-rank] " << line << std::endl;
  }
}

}  // namespace ringleader
