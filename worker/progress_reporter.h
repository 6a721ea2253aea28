// Batches a rank's step and epoch reports into ReportProgress calls: a batch is sent when it is
// `max_interval` old or holds `max_steps` step reports, whichever comes first, so a fast loop
// does not flood the coordinator and a slow one still reports promptly.
//
// The coordinator's answer can tell the rank to stop (the attempt was cancelled or failed
// elsewhere): Add*/Flush then return that as an error, and the training loop stops cleanly.
//
// Failure handling: UNAVAILABLE (ReportProgress is never retried by the client, see
// grpc_coordinator_client.h) keeps the batch for the next attempt, made once `max_interval` has
// passed (not at every step while the coordinator is down), up to `max_pending_steps`
// (the oldest step reports are dropped beyond that; epoch reports are never dropped). Any other
// error is returned: FAILED_PRECONDITION / NOT_FOUND mean the attempt is over for the
// coordinator.
//
// Thread-safety: not thread-safe; the training thread owns it.
#ifndef RINGLEADER_WORKER_PROGRESS_REPORTER_H_
#define RINGLEADER_WORKER_PROGRESS_REPORTER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client.h"

namespace ringleader {

struct ProgressReporterOptions {
  // Send a batch at least this often while steps come in.
  absl::Duration max_interval = absl::Milliseconds(200);
  // ... or as soon as it holds this many step reports.
  int max_steps = 20;
  // Step reports kept while the coordinator is unreachable.
  int max_pending_steps = 1000;
  // Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
};

class ProgressReporter {
 public:
  // `client` is not owned and must outlive the reporter.
  ProgressReporter(CoordinatorClient* client, std::string job_id, uint64_t generation,
                   uint32_t rank, ProgressReporterOptions options = {});

  // Queue a report and send the batch if it is due. Errors: ABORTED "stopped by the
  // coordinator: <reason>" when the coordinator says stop; the RPC's errors other than
  // UNAVAILABLE (see the file comment).
  absl::Status AddStep(const v1::StepReport& report);
  // Epoch reports are sent at once (with whatever steps are queued). Errors as AddStep.
  absl::Status AddEpoch(const v1::EpochReport& report);
  // Sends everything queued (even an empty batch is not sent). Errors as AddStep, plus
  // UNAVAILABLE when the batch could not be delivered.
  absl::Status Flush();

  // Reports sent so far (for tests and logs).
  int batches_sent() const { return batches_sent_; }

 private:
  absl::Status Send(bool fail_on_unavailable);

  CoordinatorClient* const client_;
  const std::string job_id_;
  const uint64_t generation_;
  const uint32_t rank_;
  const ProgressReporterOptions options_;
  Clock* const clock_;
  std::deque<v1::StepReport> steps_;
  std::vector<v1::EpochReport> epochs_;
  absl::Time last_send_;
  bool backing_off_ = false;  // the last send failed with UNAVAILABLE
  int batches_sent_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_PROGRESS_REPORTER_H_
