// Coordinator: calls of the worker daemons (registration, heartbeats, assignments) and loss.
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"

namespace ringleader {
namespace {

absl::Status ValidateRegistration(const std::string& name,
                                  const std::vector<v1::Device>& devices) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "name is empty: give each worker a stable name, e.g. node1-gpu0");
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError(
        "devices is empty: report at least one device (kind \"cpu\" or \"cuda\")");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].kind() != "cpu" && devices[i].kind() != "cuda") {
      return absl::InvalidArgumentError(absl::StrCat("devices[", i, "].kind is \"",
                                                     devices[i].kind(),
                                                     "\": use \"cpu\" or \"cuda\""));
    }
  }
  return absl::OkStatus();
}

// "NAME on HOST": how log lines (which already say "worker <id>") name a worker.
std::string NameOnHost(const WorkerRecord& worker) {
  return absl::StrCat(worker.name, " on ", worker.host);
}

std::string DescribeDevices(const std::vector<v1::Device>& devices) {
  return absl::StrJoin(devices, ", ", [](std::string* out, const v1::Device& device) {
    absl::StrAppend(out, device.kind(), ":", device.index());
  });
}

}  // namespace

absl::StatusOr<Coordinator::Registration> Coordinator::RegisterWorker(
    std::string name, std::string host, std::vector<v1::Device> devices, uint64_t incarnation,
    std::optional<RunningRank> running, const std::string& topology) {
  if (absl::Status valid = ValidateRegistration(name, devices); !valid.ok()) return valid;
  std::optional<Topology> placed_at;
  if (!topology.empty()) {
    absl::StatusOr<Topology> parsed = ParseTopology(topology);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology ", parsed.status().message(), " (the daemon's --topology)"));
    }
    placed_at = *std::move(parsed);
  }
  Scope scope(this);
  const absl::Time now = clock_->Now();
  // The registration's answer; takes the rank the daemon still runs back into its attempt.
  auto registered = [&](WorkerRecord* worker) {
    Registration registration{worker->id, options_.heartbeat_interval,
                              options_.heartbeat_timeout, options_.coordinator_grace};
    if (running.has_value()) {
      registration.running_refused = ReattachLocked(worker, *running, scope.deferred());
      registration.running_kept = registration.running_refused.empty();
    }
    if (!registration.running_kept) FailAbandonedReattachLocked(worker, scope.deferred());
    return registration;
  };
  struct Carried {
    std::string quarantine_reason;
    absl::Time quarantined_at;
    std::vector<std::string> crash_streak;
  } carried;
  if (WorkerRecord* existing = workers_.FindByName(name); existing != nullptr) {
    if (existing->incarnation == incarnation) {
      // The same daemon again: a retried call, or a lost worker that can reach us again.
      existing->last_heartbeat = now;
      if (existing->state == v1::WORKER_STATE_LOST) {
        existing->state = v1::WORKER_STATE_IDLE;
        schedule_needed_ = true;
        LogLocked(absl::StrCat("worker ", existing->id.value(), " (", NameOnHost(*existing),
                               ") is back"),
                  scope.deferred());
      }
      return registered(existing);
    }
    // A restarted daemon: whatever the old one ran is gone.
    FailWorkerAttemptLocked(existing, "restarted (incarnation changed)", scope.deferred());
    if (existing->waiter) {
      AnswerWaiterLocked(existing,
                         absl::NotFoundError(absl::StrCat("worker ", existing->id.value(),
                                                          " was replaced by a new registration "
                                                          "of ", name)),
                         scope.deferred());
    }
    LogLocked(absl::StrCat("worker ", existing->id.value(), " (", NameOnHost(*existing),
                           ") replaced: incarnation changed"),
              scope.deferred());
    carried = Carried{existing->quarantine_reason, existing->quarantined_at,
                      existing->crash_streak};
    workers_.Remove(existing->id);
  }
  WorkerRecord* worker =
      workers_.Add(std::move(name), std::move(host), std::move(devices), incarnation, now);
  if (placed_at.has_value()) worker->topology = *std::move(placed_at);
  // A restarted daemon runs on the same machine: its quarantine and crash streak stay.
  worker->quarantine_reason = std::move(carried.quarantine_reason);
  worker->quarantined_at = carried.quarantined_at;
  worker->crash_streak = std::move(carried.crash_streak);
  LogLocked(absl::StrCat("worker ", worker->id.value(), " registered: ", NameOnHost(*worker),
                         " [", DescribeDevices(worker->devices), "] topology ",
                         FormatTopology(worker->topology), " incarnation ",
                         worker->incarnation),
            scope.deferred());
  schedule_needed_ = true;
  return registered(worker);
}

std::string Coordinator::ReattachLocked(WorkerRecord* worker, const RunningRank& running,
                                        DeferredCallbacks* deferred) {
  const std::string what =
      absl::StrCat("rank ", running.rank.value(), " of job ", running.attempt.job.value(),
                   " generation ", running.attempt.generation.value());
  JobRecord* job = jobs_.Find(running.attempt.job);
  if (job == nullptr) {
    return absl::StrCat(what, jobs_.Removed(running.attempt.job)
                                  ? ": that job ended long ago (it was archived)"
                                  : ": unknown job");
  }
  v1::JobStatus& status = job->status;
  if (status.generation() != running.attempt.generation.value() ||
      status.state() != v1::JOB_STATE_RUNNING) {
    return absl::StrCat(what, ": that attempt is over (job ", JobStateName(status.state()),
                        ", generation ", status.generation(), ": ", LastReason(status), ")");
  }
  if (running.rank.value() >= static_cast<uint32_t>(status.ranks_size())) {
    return absl::StrCat(what, ": out of range (world size ", status.ranks_size(), ")");
  }
  v1::RankStatus& rank = *status.mutable_ranks(static_cast<int>(running.rank.value()));
  if (rank.worker_name() != worker->name) {
    return absl::StrCat(what, ": it runs on worker ", rank.worker_name(), ", not ", worker->name);
  }
  if (rank.finished()) return absl::StrCat(what, ": it finished already");
  if (worker->attempt.has_value() && *worker->attempt != running.attempt) {
    return absl::StrCat(what, ": the worker runs another attempt");
  }
  const bool was_away = rank.worker_id() != worker->id.value();
  rank.set_worker_id(worker->id.value());
  rank.set_host(worker->host);
  worker->state = v1::WORKER_STATE_BUSY;
  worker->attempt = running.attempt;
  worker->rank = running.rank;
  worker->undelivered.reset();
  worker->offered.reset();
  if (!was_away) return "";  // a retried registration
  MarkChangedLocked(job);
  LogLocked(absl::StrCat("worker ", worker->id.value(), " (", NameOnHost(*worker),
                         ") is back with ", what),
            deferred);
  bool all_back = true;
  for (const v1::RankStatus& other : status.ranks()) {
    if (other.worker_id().empty() && !other.finished()) all_back = false;
  }
  if (all_back && job->reattach_deadline != absl::InfiniteFuture()) {
    job->reattach_deadline = absl::InfiniteFuture();
    v1::JobEvent* event = status.add_events();
    event->set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
    event->set_message(absl::StrCat("every rank of generation ", status.generation(),
                                    " is back after the coordinator's restart; training went on"));
    SaveLocked(*job, deferred);
    LogLocked(absl::StrCat("job ", status.job_id(), ": ", event->message()), deferred);
  }
  return "";
}

void Coordinator::FailAbandonedReattachLocked(WorkerRecord* worker, DeferredCallbacks* deferred) {
  for (JobRecord* job : jobs_.All()) {
    if (job->reattach_deadline == absl::InfiniteFuture() ||
        job->status.state() != v1::JOB_STATE_RUNNING) {
      continue;
    }
    for (const v1::RankStatus& rank : job->status.ranks()) {
      if (rank.worker_name() != worker->name || !rank.worker_id().empty() || rank.finished()) {
        continue;
      }
      FailAttemptLocked(job,
                        absl::StrCat(DescribeRank(rank),
                                     " came back without its rank process after the "
                                     "coordinator's restart (its worker stopped it or restarted)"),
                        /*restartable=*/true, FailureCulprit::Of(rank), deferred);
      break;
    }
  }
}

bool Coordinator::StillOfferedLocked(const WorkerRecord& worker) {
  if (!worker.offered.has_value() || !worker.attempt.has_value()) return false;
  const v1::Assignment& offered = *worker.offered;
  if (worker.attempt->job.value() != offered.job_id() ||
      worker.attempt->generation.value() != offered.generation()) {
    return false;
  }
  JobRecord* job = jobs_.Find(worker.attempt->job);
  if (job == nullptr || job->status.state() != v1::JOB_STATE_RENDEZVOUS ||
      job->status.generation() != offered.generation() ||
      offered.rank() >= static_cast<uint32_t>(job->status.ranks_size())) {
    return false;
  }
  const v1::RankStatus& rank = job->status.ranks(static_cast<int>(offered.rank()));
  return !rank.joined() && !rank.finished();
}

absl::StatusOr<std::vector<v1::JobAttempt>> Coordinator::Heartbeat(const WorkerId& id,
                                                                   uint64_t incarnation,
                                                                   const std::string& rank_process_state) {
  Scope scope(this);
  ++heartbeats_received_;
  WorkerRecord* worker = workers_.Find(id);
  if (worker == nullptr || worker->incarnation != incarnation) {
    return absl::NotFoundError(
        absl::StrCat("unknown worker ", id.value(), " (incarnation ", incarnation,
                     "): register again"));
  }
  if (worker->state == v1::WORKER_STATE_LOST) {
    return absl::NotFoundError(absl::StrCat("worker ", id.value(),
                                            " was declared lost (no heartbeat for ",
                                            absl::FormatDuration(options_.heartbeat_timeout),
                                            "): register again"));
  }
  worker->last_heartbeat = clock_->Now();
  worker->rank_process_state = rank_process_state;
  std::vector<v1::JobAttempt> aborts;
  aborts.swap(worker->aborts);
  return aborts;
}

void Coordinator::WaitAssignmentAsync(const WorkerId& id, absl::Time deadline,
                                      AssignmentCallback done, uint64_t incarnation,
                                      std::optional<AttemptId> last_started) {
  Scope scope(this);
  const absl::Time now = clock_->Now();
  auto fail = [&](absl::Status status) {
    scope.deferred()->Add([done = std::move(done), status] { done(status); });
  };
  if (shut_down_) return fail(absl::UnavailableError("the coordinator is shutting down"));
  WorkerRecord* worker = workers_.Find(id);
  if (worker == nullptr) {
    return fail(absl::NotFoundError(absl::StrCat("unknown worker ", id.value(), ": register")));
  }
  if (incarnation != 0 && worker->incarnation != incarnation) {
    return fail(absl::NotFoundError(absl::StrCat("unknown worker ", id.value(), " (incarnation ",
                                                 incarnation, "): register again")));
  }
  if (worker->state == v1::WORKER_STATE_LOST) {
    return fail(absl::NotFoundError(
        absl::StrCat("worker ", id.value(), " was declared lost: register again")));
  }
  if (worker->offered.has_value()) {
    const AttemptId offered{JobId(worker->offered->job_id()),
                            Generation(worker->offered->generation())};
    if (last_started == offered || !StillOfferedLocked(*worker)) {
      worker->offered.reset();  // acknowledged, or nothing left to hand out again
    } else if (!worker->undelivered.has_value()) {
      LogLocked(absl::StrCat("worker ", worker->id.value(), " (", NameOnHost(*worker),
                             ") did not acknowledge rank ", worker->offered->rank(), " of job ",
                             offered.job.value(), " generation ", offered.generation.value(),
                             ": handing it out again"),
                scope.deferred());
      worker->undelivered = std::move(worker->offered);
      worker->offered.reset();
    }
  }
  // Only one poll per worker: a newer one (e.g. a retry after a client-side timeout) wins.
  if (worker->waiter) AnswerWaiterLocked(worker, std::nullopt, scope.deferred());
  worker->waiter = std::move(done);
  worker->waiter_deadline = ClampDeadline(deadline, now);
  DeliverLocked(worker, scope.deferred());
  if (worker->waiter && worker->waiter_deadline <= now) {
    AnswerWaiterLocked(worker, std::nullopt, scope.deferred());
  }
}

void Coordinator::DeliverLocked(WorkerRecord* worker, DeferredCallbacks* deferred) {
  if (!worker->undelivered.has_value() || !worker->waiter) return;
  std::optional<v1::Assignment> assignment = std::move(worker->undelivered);
  worker->undelivered.reset();
  worker->offered = assignment;  // until acknowledged
  AnswerWaiterLocked(worker, std::move(assignment), deferred);
}

void Coordinator::AnswerWaiterLocked(WorkerRecord* worker,
                                     absl::StatusOr<std::optional<v1::Assignment>> result,
                                     DeferredCallbacks* deferred) {
  AssignmentCallback done = std::move(worker->waiter);
  worker->waiter = nullptr;
  deferred->Add([done = std::move(done), result = std::move(result)] { done(result); });
}

void Coordinator::LoseWorkerLocked(WorkerRecord* worker, absl::Time now,
                                   DeferredCallbacks* deferred) {
  const absl::Duration age = absl::Trunc(now - worker->last_heartbeat, absl::Seconds(1));
  const std::string what = absl::StrCat("lost: no heartbeat for ", absl::FormatDuration(age));
  worker->state = v1::WORKER_STATE_LOST;
  schedule_needed_ = true;  // queued jobs' reasons count the workers that remain
  LogLocked(absl::StrCat("worker ", worker->id.value(), " (", NameOnHost(*worker), ") ", what),
            deferred);
  if (worker->waiter) {
    AnswerWaiterLocked(worker,
                       absl::NotFoundError(absl::StrCat("worker ", worker->id.value(),
                                                        " was declared lost: register again")),
                       deferred);
  }
  FailWorkerAttemptLocked(worker, what, deferred, /*with_last_heard=*/true);
}

void Coordinator::FailWorkerAttemptLocked(WorkerRecord* worker, const std::string& what,
                                          DeferredCallbacks* deferred, bool with_last_heard) {
  if (!worker->attempt.has_value()) return;
  JobRecord* job = jobs_.Find(worker->attempt->job);
  if (job == nullptr || IsTerminal(job->status.state()) ||
      job->status.state() == v1::JOB_STATE_QUEUED ||
      job->status.generation() != worker->attempt->generation.value()) {
    return;
  }
  const v1::RankStatus& rank = job->status.ranks(static_cast<int>(worker->rank.value()));
  FailAttemptLocked(
      job,
      absl::StrCat(DescribeRank(rank), " ", what,
                   with_last_heard ? DescribeLastHeard(EvidenceLocked(*job, rank, clock_->Now()))
                                   : ""),
      /*restartable=*/true, FailureCulprit::Of(rank), deferred);
}

std::vector<v1::WorkerStatus> Coordinator::ListWorkersPage(const std::string& after,
                                                           size_t limit, bool* more) {
  Scope scope(this);
  const absl::Time now = clock_->Now();
  std::vector<v1::WorkerStatus> page;
  bool started = after.empty();
  *more = false;
  for (const WorkerRecord* worker : workers_.InRegistrationOrder()) {
    if (!started) {
      started = worker->id.value() == after;
      continue;
    }
    if (page.size() == limit) {
      *more = true;
      break;
    }
    page.push_back(ToWorkerStatus(*worker, now));
  }
  return page;
}

std::vector<v1::WorkerStatus> Coordinator::ListWorkers() {
  Scope scope(this);
  const absl::Time now = clock_->Now();
  std::vector<v1::WorkerStatus> all;
  for (const WorkerRecord* worker : workers_.InRegistrationOrder()) {
    all.push_back(ToWorkerStatus(*worker, now));
  }
  return all;
}

}  // namespace ringleader
