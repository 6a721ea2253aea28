// Hang forensics: the ranks' collective trace rings, gathered on demand (coordinator.h).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/states.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/hang_report.h"
#include "coordinator/core/job_state.h"

namespace ringleader {

absl::StatusOr<uint64_t> Coordinator::RequestTraces(const JobId& id) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return NotInMemoryLocked(id, "its ranks can no longer be asked");
  if (job->status.ranks_size() == 0 || AttemptOver(job->status) ||
      IsTerminal(job->status.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id.value(), " has no running attempt: 'ringleader status ", id.value(),
        "' shows its last hang report, if one was taken"));
  }
  job->traces_requested = true;
  job->traces.clear();
  MarkChangedLocked(job);  // watchers see that a report is being taken
  return job->status.version();
}

v1::HangReport Coordinator::HangReportLocked(const JobRecord& job) {
  const absl::Time now = clock_->Now();
  std::vector<v1::RankTrace> ranks;
  for (const v1::RankStatus& status : job.status.ranks()) {
    v1::RankTrace trace;
    trace.set_rank(status.rank());
    if (auto contact = job.last_contact.find(status.rank()); contact != job.last_contact.end()) {
      trace.set_silent_ms(absl::ToInt64Milliseconds(now - contact->second));
    } else {
      trace.set_silent_ms(-1);
    }
    if (auto counts = job.collective_counts.find(status.rank());
        counts != job.collective_counts.end()) {
      trace.set_collectives_issued(counts->second.first);
      trace.set_collectives_completed(counts->second.second);
    }
    if (auto ring = job.traces.find(status.rank()); ring != job.traces.end()) {
      trace.set_answered(true);
      for (const v1::CollectiveTraceEntry& e : ring->second) *trace.add_entries() = e;
      if (!ring->second.empty()) {
        trace.set_collectives_issued(ring->second.back().sequence() + 1);
        uint64_t completed = ring->second.back().sequence() + 1;
        for (const v1::CollectiveTraceEntry& e : ring->second) {
          if (e.state() != v1::CollectiveTraceEntry::COMPLETED) {
            completed = e.sequence();
            break;
          }
        }
        trace.set_collectives_completed(completed);
      }
    }
    ranks.push_back(std::move(trace));
  }
  v1::HangReport report = AnalyzeHang(std::move(ranks));
  report.set_created_unix_ms(absl::ToUnixMillis(now));
  return report;
}

void Coordinator::KeepHangReportLocked(JobRecord* job, v1::HangReport report) {
  // The job's status keeps the summary and, per rank, only the entry the ranks disagree on.
  for (v1::RankTrace& rank : *report.mutable_ranks()) {
    std::vector<v1::CollectiveTraceEntry> at;
    for (const v1::CollectiveTraceEntry& e : rank.entries()) {
      if (report.ranks_disagree() && e.sequence() == report.first_sequence()) at.push_back(e);
    }
    rank.clear_entries();
    for (v1::CollectiveTraceEntry& e : at) *rank.add_entries() = std::move(e);
  }
  *job->status.mutable_hang() = std::move(report);
  MarkChangedLocked(job);
}

std::string Coordinator::HangSummaryLocked(JobRecord* job, const v1::RankFailure& failure) {
  if (failure.kind() != v1::RankFailure::PEER_TIMED_OUT || job->traces.empty()) return "";
  v1::HangReport report = HangReportLocked(*job);
  if (!report.ranks_disagree()) return "";
  std::string summary = report.summary();
  KeepHangReportLocked(job, std::move(report));
  return absl::StrCat("; in the collectives: ", summary);
}

absl::StatusOr<Coordinator::HangProgress> Coordinator::CollectHangReport(const JobId& id,
                                                                         bool keep) {
  Scope scope(this);
  JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return NotInMemoryLocked(id, "its ranks can no longer be asked");
  if (job->status.ranks_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id.value(), " has not run yet: no rank to ask"));
  }
  HangProgress progress;
  progress.report = HangReportLocked(*job);
  progress.complete = true;
  for (const v1::RankStatus& rank : job->status.ranks()) {
    if (!rank.finished() && !job->traces.count(rank.rank())) progress.complete = false;
  }
  if (keep) {
    KeepHangReportLocked(job, progress.report);
    job->traces_requested = false;
  }
  return progress;
}

}  // namespace ringleader
