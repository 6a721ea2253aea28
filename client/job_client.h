// JobClient: the CLI's view of the coordinator's JobService, one method per RPC.
//
// The CLI commands take a `JobClient&`, so they run against the gRPC implementation
// (grpc_job_client.h) in the binary and against a gMock (mock_job_client.h) in tests.
// Implementations are thread-compatible at least; the gRPC one is thread-safe.
#ifndef RINGLEADER_CLIENT_JOB_CLIENT_H_
#define RINGLEADER_CLIENT_JOB_CLIENT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

class JobClient {
 public:
  virtual ~JobClient() = default;

  // Validates and queues a job. Errors: INVALID_ARGUMENT (the message names the spec field),
  // UNAVAILABLE (coordinator unreachable), DEADLINE_EXCEEDED (call timeout).
  virtual absl::StatusOr<v1::SubmitJobResponse> Submit(const v1::JobSpec& spec) = 0;

  // Errors: NOT_FOUND (unknown job), UNAVAILABLE, DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::GetJobResponse> Get(const std::string& job_id) = 0;

  // Long poll: answers once the job's version exceeds `after_version`, or after `wait` with
  // the current status. The call deadline is `wait` plus the client's call timeout.
  // Errors: NOT_FOUND, UNAVAILABLE, DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::WatchJobResponse> Watch(const std::string& job_id,
                                                     uint64_t after_version,
                                                     absl::Duration wait) = 0;

  // Every job (every page), oldest first; with `include_archived` also the jobs the
  // coordinator archived (JobStatus.archived). Errors: UNAVAILABLE, DEADLINE_EXCEEDED, the
  // coordinator's (ListJobs).
  virtual absl::StatusOr<v1::ListJobsResponse> List(bool include_archived) = 0;
  // Errors: UNAVAILABLE, DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::ListWorkersResponse> ListWorkers() = 0;

  // Errors: NOT_FOUND; FAILED_PRECONDITION (job already finished); UNAVAILABLE;
  // DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::CancelJobResponse> Cancel(const std::string& job_id,
                                                       const std::string& reason) = 0;

  // The current attempt's per-step, per-rank metrics, ordered by step then rank; older steps
  // are decimated (see v1::GetJobMetricsResponse). Errors: NOT_FOUND, UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::GetJobMetricsResponse> GetJobMetrics(const std::string& job_id) = 0;

  // The ranks' output of one attempt (see v1::GetLogsRequest); a long poll when
  // request.wait_timeout_ms > 0, whose call deadline is that wait plus the call timeout.
  // Errors: NOT_FOUND, INVALID_ARGUMENT (rank or generation out of range), UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& request) = 0;

  // Hang forensics (v1::DebugJobRequest): asks the job's ranks for their collective trace
  // rings and waits up to wait_ms for them; the call deadline is that wait plus the call
  // timeout. Errors: NOT_FOUND, FAILED_PRECONDITION (no running attempt), UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  virtual absl::StatusOr<v1::DebugJobResponse> Debug(const std::string& job_id,
                                                     uint32_t wait_ms) = 0;

  // Pre-flight check (v1::RunDoctorRequest): blocks until the check job ends or the request's
  // wait runs out; the call deadline is that wait (0: 30 s) plus the call timeout. Errors:
  // INVALID_ARGUMENT, NOT_FOUND (unknown worker), FAILED_PRECONDITION (a worker not idle),
  // DEADLINE_EXCEEDED, UNAVAILABLE; UNIMPLEMENTED from a client without it (this default).
  virtual absl::StatusOr<v1::RunDoctorResponse> RunDoctor(const v1::RunDoctorRequest& request) {
    return absl::UnimplementedError("RunDoctor: not implemented by this client");
  }
  // Errors: NOT_FOUND, FAILED_PRECONDITION (not quarantined), UNAVAILABLE, DEADLINE_EXCEEDED;
  // UNIMPLEMENTED from a client without it (this default).
  virtual absl::StatusOr<v1::UncordonWorkerResponse> Uncordon(const std::string& worker) {
    return absl::UnimplementedError("UncordonWorker: not implemented by this client");
  }

  // The "host:port" of the coordinator that answered the last successful call, when it matters
  // which one did: the client was given several coordinators, or a standby sent the call on to
  // the leader. The one that answered is then the leader (a standby answers nothing). "" with a
  // single coordinator that answered itself, before any call, or from a client that does not
  // know (this default).
  virtual std::string AnsweringLeader() const { return ""; }
};

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_JOB_CLIENT_H_
