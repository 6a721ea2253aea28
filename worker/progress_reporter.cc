#include "worker/progress_reporter.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

ProgressReporter::ProgressReporter(CoordinatorClient* client, std::string job_id,
                                   uint64_t generation, uint32_t rank,
                                   ProgressReporterOptions options)
    : client_(client),
      job_id_(std::move(job_id)),
      generation_(generation),
      rank_(rank),
      options_(options),
      clock_(options.clock ? options.clock : Clock::Real()),
      last_send_(clock_->Now()) {}

absl::Status ProgressReporter::AddStep(const v1::StepReport& report) {
  steps_.push_back(report);
  while (static_cast<int>(steps_.size()) > options_.max_pending_steps) steps_.pop_front();
  // While the coordinator is unreachable only the interval paces retries, not every step.
  const bool due = (static_cast<int>(steps_.size()) >= options_.max_steps && !backing_off_) ||
                   clock_->Now() - last_send_ >= options_.max_interval;
  return due ? Send(/*fail_on_unavailable=*/false) : absl::OkStatus();
}

absl::Status ProgressReporter::AddEpoch(const v1::EpochReport& report) {
  epochs_.push_back(report);
  return Send(/*fail_on_unavailable=*/false);
}

absl::Status ProgressReporter::Flush() { return Send(/*fail_on_unavailable=*/true); }

absl::Status ProgressReporter::Send(bool fail_on_unavailable) {
  if (steps_.empty() && epochs_.empty()) return absl::OkStatus();
  v1::ReportProgressRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_rank(rank_);
  for (const v1::StepReport& step : steps_) *request.add_steps() = step;
  for (const v1::EpochReport& epoch : epochs_) *request.add_epochs() = epoch;
  // The interval restarts even on failure: an unreachable coordinator is retried at the
  // reporting pace, not at every step.
  last_send_ = clock_->Now();
  absl::StatusOr<v1::ReportProgressResponse> response = client_->ReportProgress(request);
  if (!response.ok()) {
    if (response.status().code() == absl::StatusCode::kUnavailable) {
      backing_off_ = true;
      // Keep the batch; the next send carries it.
      if (!fail_on_unavailable) return absl::OkStatus();
    }
    return response.status();
  }
  backing_off_ = false;
  steps_.clear();
  epochs_.clear();
  ++batches_sent_;
  if (response->stop()) {
    return absl::AbortedError(absl::StrCat(
        "stopped by the coordinator: ",
        response->stop_reason().empty() ? "the attempt is over" : response->stop_reason()));
  }
  return absl::OkStatus();
}

}  // namespace ringleader
