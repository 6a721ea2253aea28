#include "coordinator/rpc/rpc_handler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

// Bounds on the free text a rank or daemon sends for failure reasons (the rest is cut).
constexpr size_t kMaxActivityDetailBytes = 256;
constexpr size_t kMaxProcessStateBytes = 32;

v1::RankActivity BoundedActivity(const v1::RankActivity& activity) {
  v1::RankActivity bounded = activity;
  if (bounded.detail().size() > kMaxActivityDetailBytes) {
    bounded.mutable_detail()->resize(kMaxActivityDetailBytes);
  }
  return bounded;
}

AttemptId Attempt(const std::string& job_id, uint64_t generation) {
  return AttemptId{JobId(job_id), Generation(generation)};
}

}  // namespace

// A List page's size: 0 = the default 500, at most 1000.
static size_t PageSize(uint32_t requested) {
  constexpr size_t kDefault = 500;
  constexpr size_t kMax = 1000;
  return requested == 0 ? kDefault : std::min<size_t>(requested, kMax);
}

absl::Time RpcHandler::Deadline(uint32_t wait_timeout_ms) const {
  return coordinator_->clock()->Now() + absl::Milliseconds(wait_timeout_ms);
}

void RpcHandler::CountRefused(absl::string_view method, const absl::Status& refusal) {
  if (stats_ != nullptr) stats_->Record(method, refusal.code(), absl::ZeroDuration());
}

template <typename Body>
absl::Status RpcHandler::Measured(absl::string_view method, Body body) {
  if (stats_ == nullptr) return body();
  Clock* const clock = coordinator_->clock();
  const absl::Time start = clock->Now();
  absl::Status status = body();
  stats_->Record(method, status.code(), clock->Now() - start);
  return status;
}

StatusCallback RpcHandler::Measured(absl::string_view method, StatusCallback done) {
  if (stats_ == nullptr) return done;
  Clock* const clock = coordinator_->clock();
  return [stats = stats_, clock, method = std::string(method), start = clock->Now(),
          done = std::move(done)](absl::Status status) {
    // Recorded before `done`: once the caller sees the answer, the call is counted.
    stats->Record(method, status.code(), clock->Now() - start);
    done(std::move(status));
  };
}

absl::Status RpcHandler::RegisterWorker(const v1::RegisterWorkerRequest& request,
                                        v1::RegisterWorkerResponse* response) {
  return Measured("RegisterWorker", [&]() -> absl::Status {
    std::optional<Coordinator::RunningRank> running;
    if (request.has_running()) {
      running = Coordinator::RunningRank{
          Attempt(request.running().job_id(), request.running().generation()),
          Rank(request.running_rank())};
    }
    absl::StatusOr<Coordinator::Registration> registration = coordinator_->RegisterWorker(
        request.name(), request.host(), {request.devices().begin(), request.devices().end()},
        request.incarnation(), std::move(running), request.topology());
    if (!registration.ok()) return registration.status();
    response->set_running_kept(registration->running_kept);
    response->set_running_refused(registration->running_refused);
    response->set_coordinator_grace_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(registration->coordinator_grace)));
    response->set_worker_id(registration->id.value());
    response->set_heartbeat_interval_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(registration->heartbeat_interval)));
    response->set_heartbeat_timeout_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(registration->heartbeat_timeout)));
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::Heartbeat(const v1::HeartbeatRequest& request,
                                   v1::HeartbeatResponse* response) {
  return Measured("Heartbeat", [&]() -> absl::Status {
    absl::StatusOr<std::vector<v1::JobAttempt>> aborts =
        coordinator_->Heartbeat(WorkerId(request.worker_id()), request.incarnation(),
                                request.rank_process_state().substr(0, kMaxProcessStateBytes));
    if (!aborts.ok()) return aborts.status();
    for (v1::JobAttempt& abort : *aborts) *response->add_abort() = std::move(abort);
    return absl::OkStatus();
  });
}

void RpcHandler::WaitAssignment(const v1::WaitAssignmentRequest& request,
                                v1::WaitAssignmentResponse* response, StatusCallback done) {
  done = Measured("WaitAssignment", std::move(done));
  coordinator_->WaitAssignmentAsync(
      WorkerId(request.worker_id()), Deadline(request.wait_timeout_ms()),
      [response, done = std::move(done)](absl::StatusOr<std::optional<v1::Assignment>> result) {
        if (!result.ok()) return done(result.status());
        if (result->has_value()) *response->mutable_assignment() = std::move(**result);
        done(absl::OkStatus());
      },
      request.incarnation(),
      request.has_last_started()
          ? std::optional<AttemptId>(
                Attempt(request.last_started().job_id(), request.last_started().generation()))
          : std::nullopt);
}

absl::Status RpcHandler::JoinJob(const v1::JoinJobRequest& request, v1::JoinJobResponse*) {
  return Measured("JoinJob", [&]() -> absl::Status {
    return coordinator_->JoinJob(Attempt(request.job_id(), request.generation()),
                                 Rank(request.rank()), WorkerId(request.worker_id()),
                                 request.spec_fingerprint());
  });
}

absl::Status RpcHandler::KvSet(const v1::KvSetRequest& request, v1::KvSetResponse*) {
  return Measured("KvSet", [&]() -> absl::Status {
    return coordinator_->KvSet(Attempt(request.job_id(), request.generation()), request.key(),
                               request.value());
  });
}

void RpcHandler::KvGet(const v1::KvGetRequest& request, v1::KvGetResponse* response,
                       StatusCallback done) {
  done = Measured("KvGet", std::move(done));
  coordinator_->KvGetAsync(
      Attempt(request.job_id(), request.generation()), request.key(),
      Deadline(request.wait_timeout_ms()),
      [response, done = std::move(done)](absl::StatusOr<std::string> value) {
        if (!value.ok()) return done(value.status());
        response->set_value(std::move(*value));
        done(absl::OkStatus());
      });
}

void RpcHandler::KvGetMany(const v1::KvGetManyRequest& request, v1::KvGetManyResponse* response,
                           StatusCallback done) {
  done = Measured("KvGetMany", std::move(done));
  coordinator_->KvGetManyAsync(
      Attempt(request.job_id(), request.generation()),
      {request.keys().begin(), request.keys().end()},
      KvParts{request.parts(), {request.part_index().begin(), request.part_index().end()}},
      Deadline(request.wait_timeout_ms()),
      [response, done = std::move(done)](absl::StatusOr<std::vector<std::string>> values) {
        if (!values.ok()) return done(values.status());
        for (std::string& value : *values) response->add_values(std::move(value));
        done(absl::OkStatus());
      });
}

absl::Status RpcHandler::ReportProgress(const v1::ReportProgressRequest& request,
                                        v1::ReportProgressResponse* response) {
  return Measured("ReportProgress", [&]() -> absl::Status {
    if (request.has_trace()) {
      RETURN_IF_ERROR(coordinator_->ReportTrace(
          Attempt(request.job_id(), request.generation()), Rank(request.rank()),
          {request.trace().begin(), request.trace().end()}));
    }
    if (request.has_preflight()) {
      RETURN_IF_ERROR(coordinator_->ReportPreflight(
          Attempt(request.job_id(), request.generation()), Rank(request.rank()),
          request.preflight()));
    }
    absl::StatusOr<Coordinator::StopSignal> stop = coordinator_->ReportProgress(
        Attempt(request.job_id(), request.generation()), Rank(request.rank()),
        {request.steps().begin(), request.steps().end()},
        {request.epochs().begin(), request.epochs().end()}, BoundedActivity(request.activity()));
    if (!stop.ok()) return stop.status();
    response->set_stop(stop->stop);
    response->set_stop_reason(stop->reason);
    response->set_steps_judged(stop->steps_judged);
    response->set_send_trace(stop->send_trace);
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::FinishRank(const v1::FinishRankRequest& request,
                                    v1::FinishRankResponse*) {
  return Measured("FinishRank", [&]() -> absl::Status {
    if (request.trace_size() > 0) {
      // Kept for the hang report; an attempt already over refuses it, as FinishRank answers.
      coordinator_->ReportTrace(Attempt(request.job_id(), request.generation()),
                                Rank(request.rank()),
                                {request.trace().begin(), request.trace().end()})
          .IgnoreError();
    }
    Coordinator::RankOutcome outcome{request.ok(), request.error(), request.checkpoint_path(),
                                     request.failure()};
    outcome.failure.set_peer_address(
        outcome.failure.peer_address().substr(0, kMaxActivityDetailBytes));
    return coordinator_->FinishRank(Attempt(request.job_id(), request.generation()),
                                    Rank(request.rank()), outcome);
  });
}

absl::Status RpcHandler::AppendLogs(const v1::AppendLogsRequest& request,
                                    v1::AppendLogsResponse*) {
  return Measured("AppendLogs", [&]() -> absl::Status {
    return coordinator_->AppendLogs(Attempt(request.job_id(), request.generation()),
                                    Rank(request.rank()), request.offset(), request.data());
  });
}

absl::Status RpcHandler::SubmitJob(const v1::SubmitJobRequest& request,
                                   v1::SubmitJobResponse* response) {
  return Measured("SubmitJob", [&]() -> absl::Status {
    absl::StatusOr<Coordinator::Submitted> submitted = coordinator_->SubmitJob(request.spec());
    if (!submitted.ok()) return submitted.status();
    response->set_job_id(submitted->id.value());
    response->set_spec_fingerprint(submitted->spec_fingerprint);
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::GetJob(const v1::GetJobRequest& request, v1::GetJobResponse* response) {
  return Measured("GetJob", [&]() -> absl::Status {
    absl::StatusOr<v1::JobStatus> job = coordinator_->GetJob(JobId(request.job_id()));
    if (!job.ok()) return job.status();
    *response->mutable_job() = std::move(*job);
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::GetJobMetrics(const v1::GetJobMetricsRequest& request,
                                       v1::GetJobMetricsResponse* response) {
  return Measured("GetJobMetrics", [&]() -> absl::Status {
    absl::StatusOr<v1::GetJobMetricsResponse> metrics =
        coordinator_->GetJobMetrics(JobId(request.job_id()));
    if (!metrics.ok()) return metrics.status();
    *response = std::move(*metrics);
    return absl::OkStatus();
  });
}

void RpcHandler::WatchJob(const v1::WatchJobRequest& request, v1::WatchJobResponse* response,
                          StatusCallback done) {
  done = Measured("WatchJob", std::move(done));
  coordinator_->WatchJobAsync(
      JobId(request.job_id()), request.after_version(), Deadline(request.wait_timeout_ms()),
      [response, done = std::move(done)](absl::StatusOr<v1::JobStatus> job) {
        if (!job.ok()) return done(job.status());
        *response->mutable_job() = std::move(*job);
        done(absl::OkStatus());
      });
}

void RpcHandler::GetLogs(const v1::GetLogsRequest& request, v1::GetLogsResponse* response,
                         StatusCallback done) {
  done = Measured("GetLogs", std::move(done));
  Coordinator::LogsQuery query;
  if (request.has_rank()) query.rank = Rank(request.rank());
  query.generation = Generation(request.generation());
  for (const v1::LogCursor& cursor : request.after()) query.after[cursor.rank()] = cursor.offset();
  coordinator_->GetLogsAsync(
      JobId(request.job_id()), std::move(query), Deadline(request.wait_timeout_ms()),
      [response, done = std::move(done)](absl::StatusOr<v1::GetLogsResponse> logs) {
        if (!logs.ok()) return done(logs.status());
        *response = std::move(*logs);
        done(absl::OkStatus());
      });
}

void RpcHandler::DebugJob(const v1::DebugJobRequest& request, v1::DebugJobResponse* response,
                          StatusCallback done) {
  done = Measured("DebugJob", std::move(done));
  const JobId job(request.job_id());
  absl::StatusOr<uint64_t> version = coordinator_->RequestTraces(job);
  if (!version.ok()) return done(version.status());
  const uint32_t wait_ms = request.wait_ms() == 0 ? 5000 : std::min(request.wait_ms(), 60000u);
  AwaitTraces(job, *version, Deadline(wait_ms), response, std::move(done));
}

void RpcHandler::AwaitTraces(const JobId& job, uint64_t version, absl::Time deadline,
                             v1::DebugJobResponse* response, StatusCallback done) {
  absl::StatusOr<Coordinator::HangProgress> progress =
      coordinator_->CollectHangReport(job, /*keep=*/false);
  if (!progress.ok()) return done(progress.status());
  if (progress->complete || coordinator_->clock()->Now() >= deadline) {
    progress = coordinator_->CollectHangReport(job, /*keep=*/true);
    if (!progress.ok()) return done(progress.status());
    *response->mutable_report() = std::move(progress->report);
    return done(absl::OkStatus());
  }
  coordinator_->WatchJobAsync(
      job, version, deadline,
      [this, job, deadline, response, done](absl::StatusOr<v1::JobStatus> status) {
        if (!status.ok()) return done(status.status());
        // The watch answers when the job moved (a ring arrived) or at the deadline.
        AwaitTraces(job, status->version(), deadline, response, done);
      });
}

absl::Status RpcHandler::ListJobs(const v1::ListJobsRequest& request,
                                  v1::ListJobsResponse* response) {
  return Measured("ListJobs", [&]() -> absl::Status {
    absl::StatusOr<Coordinator::JobsPage> page = coordinator_->ListJobsPage(
        request.page_token(), PageSize(request.page_size()), request.include_archived());
    if (page.status().code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_token: '", request.page_token(), "' is not a next_page_token of ListJobs"));
    }
    if (!page.ok()) return page.status();
    for (v1::JobStatus& job : page->jobs) *response->add_jobs() = std::move(job);
    if (page->more) response->set_next_page_token(response->jobs().rbegin()->job_id());
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::ListWorkers(const v1::ListWorkersRequest& request,
                                     v1::ListWorkersResponse* response) {
  return Measured("ListWorkers", [&]() -> absl::Status {
    bool more = false;
    std::vector<v1::WorkerStatus> page = coordinator_->ListWorkersPage(
        request.page_token(), PageSize(request.page_size()), &more);
    if (page.empty() && !request.page_token().empty()) {
      bool known = false;
      for (const v1::WorkerStatus& worker : coordinator_->ListWorkers()) {
        known |= worker.worker_id() == request.page_token();
      }
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat(
            "page_token: '", request.page_token(), "' is not a next_page_token of ListWorkers"));
      }
    }
    for (v1::WorkerStatus& worker : page) *response->add_workers() = std::move(worker);
    if (more) response->set_next_page_token(response->workers().rbegin()->worker_id());
    return absl::OkStatus();
  });
}

void RpcHandler::RunDoctor(const v1::RunDoctorRequest& request, v1::RunDoctorResponse* response,
                           StatusCallback done) {
  done = Measured("RunDoctor", std::move(done));
  Coordinator::DoctorRequest doctor;
  doctor.workers.assign(request.workers().begin(), request.workers().end());
  doctor.min_fraction =
      request.has_min_fraction() ? request.min_fraction() : kDefaultPreflightMinFraction;
  // 0: as long as the coordinator lets a call wait (its max_wait).
  const absl::Time deadline = request.wait_timeout_ms() == 0
                                  ? absl::InfiniteFuture()
                                  : Deadline(request.wait_timeout_ms());
  coordinator_->RunDoctorAsync(
      std::move(doctor), deadline,
      [response, done = std::move(done)](absl::StatusOr<v1::PreflightResult> result) {
        if (!result.ok()) return done(result.status());
        *response->mutable_result() = std::move(*result);
        done(absl::OkStatus());
      });
}

absl::Status RpcHandler::UncordonWorker(const v1::UncordonWorkerRequest& request,
                                        v1::UncordonWorkerResponse* response) {
  return Measured("UncordonWorker", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*response->mutable_worker(), coordinator_->UncordonWorker(request.worker()));
    return absl::OkStatus();
  });
}

absl::Status RpcHandler::CancelJob(const v1::CancelJobRequest& request, v1::CancelJobResponse*) {
  return Measured("CancelJob", [&]() -> absl::Status {
    return coordinator_->CancelJob(JobId(request.job_id()), request.reason());
  });
}

}  // namespace ringleader
