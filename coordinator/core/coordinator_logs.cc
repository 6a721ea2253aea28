// Coordinator: reading the ranks' output (GetLogs long polls). AppendLogs, a call of the ranks'
// daemons, lives with the other attempt calls in coordinator_attempts.cc.
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_state.h"

namespace ringleader {
namespace {

std::optional<uint64_t> CursorOf(const JobRecord::LogWaiter& waiter, uint32_t rank) {
  auto cursor = waiter.after.find(rank);
  if (cursor == waiter.after.end()) return std::nullopt;
  return cursor->second;
}

}  // namespace

bool Coordinator::LogsOverLocked(const JobRecord& job, uint64_t generation, absl::Time now) const {
  const v1::JobStatus& status = job.status;
  if (generation == 0) return IsTerminal(status.state());  // never ran: nothing will come
  if (generation < status.generation()) return true;       // a later attempt started: stale appends
  return AttemptOver(status) && now >= job.attempt_ended + options_.log_linger;
}

bool Coordinator::LogsReadyLocked(const JobRecord& job, const JobRecord::LogWaiter& waiter,
                                  absl::Time now) const {
  if (waiter.deadline <= now || LogsOverLocked(job, waiter.generation, now)) return true;
  const JobId id(job.status.job_id());
  if (waiter.rank.has_value()) {
    return logs_.HasNew(id, waiter.generation, *waiter.rank, CursorOf(waiter, *waiter.rank));
  }
  for (uint32_t rank : logs_.Ranks(id, waiter.generation)) {
    if (logs_.HasNew(id, waiter.generation, rank, CursorOf(waiter, rank))) return true;
  }
  return false;
}

v1::GetLogsResponse Coordinator::RenderLogsLocked(const JobRecord& job,
                                                  const JobRecord::LogWaiter& waiter,
                                                  absl::Time now) const {
  const JobId id(job.status.job_id());
  v1::GetLogsResponse response;
  response.set_generation(waiter.generation);
  response.set_job_over(IsTerminal(job.status.state()));
  const std::vector<uint32_t> ranks = waiter.rank.has_value() ? std::vector<uint32_t>{*waiter.rank}
                                                              : logs_.Ranks(id, waiter.generation);
  size_t budget = options_.max_log_bytes_per_answer;
  bool complete = true;  // every byte kept past the cursors is in the answer
  for (uint32_t rank : ranks) {
    std::optional<uint64_t> next = CursorOf(waiter, rank);
    std::optional<v1::LogChunk> chunk = logs_.Read(id, waiter.generation, rank, next, budget);
    if (chunk.has_value()) {
      budget -= chunk->data().size();
      next = chunk->offset() + chunk->data().size();
      *response.add_chunks() = std::move(*chunk);
    }
    if (logs_.HasNew(id, waiter.generation, rank, next)) complete = false;
  }
  response.set_attempt_over(complete && LogsOverLocked(job, waiter.generation, now));
  return response;
}

void Coordinator::AnswerLogWaitersLocked(JobRecord* job, DeferredCallbacks* deferred) {
  if (job->log_waiters.empty()) return;
  const absl::Time now = clock_->Now();
  std::vector<JobRecord::LogWaiter> still_waiting;
  for (JobRecord::LogWaiter& waiter : job->log_waiters) {
    if (LogsReadyLocked(*job, waiter, now)) {
      deferred->Add([done = std::move(waiter.done),
                     response = RenderLogsLocked(*job, waiter, now)] { done(response); });
    } else {
      still_waiting.push_back(std::move(waiter));
    }
  }
  job->log_waiters = std::move(still_waiting);
}

void Coordinator::GetLogsAsync(const JobId& id, LogsQuery query, absl::Time deadline,
                               LogsCallback done) {
  Scope scope(this);
  auto answer = [&](absl::StatusOr<v1::GetLogsResponse> result) {
    scope.deferred()->Add([done = std::move(done), result = std::move(result)] { done(result); });
  };
  if (shut_down_) return answer(absl::UnavailableError("the coordinator is shutting down"));
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return answer(NotInMemoryLocked(id, "its output is"));
  const v1::JobStatus& status = job->status;
  const uint32_t world = status.spec().world_size();
  auto out_of_range = [&](uint32_t rank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is out of range for job ",
                                                   id.value(), " (world size ", world, ")"));
  };
  if (query.rank.has_value() && query.rank->value() >= world) {
    return answer(out_of_range(query.rank->value()));
  }
  for (const auto& [rank, offset] : query.after) {
    if (rank >= world) return answer(out_of_range(rank));
  }
  if (query.generation.value() > status.generation()) {
    return answer(absl::InvalidArgumentError(
        status.generation() == 0
            ? absl::StrCat("job ", id.value(), " has no generation ", query.generation.value(),
                           ": it has not run yet (", JobStateName(status.state()), ")")
            : absl::StrCat("job ", id.value(), " has no generation ", query.generation.value(),
                           " (its latest is ", status.generation(), ")")));
  }
  const absl::Time now = clock_->Now();
  JobRecord::LogWaiter waiter{
      query.generation.value() != 0 ? query.generation.value() : status.generation(),
      query.rank.has_value() ? std::optional<uint32_t>(query.rank->value()) : std::nullopt,
      std::move(query.after), ClampDeadline(deadline, now), nullptr};
  // Generation 0: the job has not run; its first attempt is a new generation to ask for.
  if (waiter.generation == 0 || LogsReadyLocked(*job, waiter, now)) {
    return answer(RenderLogsLocked(*job, waiter, now));
  }
  waiter.done = std::move(done);
  job->log_waiters.push_back(std::move(waiter));
}

}  // namespace ringleader
