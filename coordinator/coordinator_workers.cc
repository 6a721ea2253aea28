// Coordinator: calls of the worker daemons (registration, heartbeats, assignments) and loss.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_state.h"

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
    std::string name, std::string host, std::vector<v1::Device> devices, uint64_t incarnation) {
  if (absl::Status valid = ValidateRegistration(name, devices); !valid.ok()) return valid;
  Scope scope(this);
  const absl::Time now = clock_->Now();
  auto registered = [this](const WorkerId& id) {
    return Registration{id, options_.heartbeat_interval, options_.heartbeat_timeout};
  };
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
      return registered(existing->id);
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
    workers_.Remove(existing->id);
  }
  WorkerRecord* worker =
      workers_.Add(std::move(name), std::move(host), std::move(devices), incarnation, now);
  LogLocked(absl::StrCat("worker ", worker->id.value(), " registered: ", NameOnHost(*worker),
                         " [", DescribeDevices(worker->devices), "] incarnation ",
                         worker->incarnation),
            scope.deferred());
  schedule_needed_ = true;
  return registered(worker->id);
}

absl::StatusOr<std::vector<v1::JobAttempt>> Coordinator::Heartbeat(const WorkerId& id,
                                                                   uint64_t incarnation) {
  Scope scope(this);
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
  std::vector<v1::JobAttempt> aborts;
  aborts.swap(worker->aborts);
  return aborts;
}

void Coordinator::WaitAssignmentAsync(const WorkerId& id, absl::Time deadline,
                                      AssignmentCallback done, uint64_t incarnation) {
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
  FailWorkerAttemptLocked(worker, what, deferred);
}

void Coordinator::FailWorkerAttemptLocked(WorkerRecord* worker, const std::string& what,
                                          DeferredCallbacks* deferred) {
  if (!worker->attempt.has_value()) return;
  JobRecord* job = jobs_.Find(worker->attempt->job);
  if (job == nullptr || IsTerminal(job->status.state()) ||
      job->status.state() == v1::JOB_STATE_QUEUED ||
      job->status.generation() != worker->attempt->generation.value()) {
    return;
  }
  const v1::RankStatus& rank = job->status.ranks(static_cast<int>(worker->rank.value()));
  FailAttemptLocked(job, absl::StrCat(DescribeRank(rank), " ", what), /*restartable=*/true,
                    deferred);
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
