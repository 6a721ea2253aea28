// `ringleader status | list | workers | cancel`: one call each, printed as tables. `status`
// includes the coordinator's verdict so far, its alarms and straggler scores; `status` and
// `list` say why a QUEUED job waits.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/table.h"
#include "common/job_spec.h"
#include "common/rank_phase.h"
#include "client/verdict_format.h"
#include "plan/memory_plan.h"

namespace ringleader {
namespace {

std::string RankState(const v1::RankStatus& rank) {
  if (rank.finished()) return rank.ok() ? "done" : "failed";
  return rank.joined() ? "running" : "waiting";
}

// The lowest step any rank reported ("-" when none did): the job's progress.
std::string SlowestStep(const v1::JobStatus& job) {
  bool any = false;
  uint64_t slowest = 0;
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!rank.has_last_step()) continue;
    slowest = any ? std::min(slowest, rank.last_step().step()) : rank.last_step().step();
    any = true;
  }
  return any ? absl::StrCat(slowest) : "-";
}

// "12.3s"; "running" while it has no end.
std::string AttemptDuration(const v1::AttemptSummary& attempt) {
  if (attempt.end_time_unix_ms() == 0) return "running";
  return absl::FormatDuration(absl::Trunc(
      absl::Milliseconds(attempt.end_time_unix_ms() - attempt.start_time_unix_ms()),
      absl::Milliseconds(100)));
}

// Every attempt (generation, workers, resumed step, last step, duration, how it ended) and the
// job's events, once there is more than one attempt or an event.
void AppendAttemptsAndEvents(const v1::JobStatus& job, std::string* text) {
  if (job.attempts_size() > 1 || job.restarts() > 0) {
    Table attempts({"GEN", "WORKERS", "RESUMED_AFTER", "LAST_STEP", "DURATION", "ENDED"}, "  ");
    for (const v1::AttemptSummary& attempt : job.attempts()) {
      attempts.AddRow({absl::StrCat(attempt.generation()), absl::StrJoin(attempt.workers(), ", "),
                       absl::StrCat(attempt.resumed_from_step()),
                       absl::StrCat(attempt.last_step()), AttemptDuration(attempt),
                       attempt.end_reason().empty() ? "-" : attempt.end_reason()});
    }
    absl::StrAppend(text, "\nattempts\n", attempts.Render());
  }
  if (job.events_size() > 0) {
    absl::StrAppend(text, "\nevents\n");
    for (const v1::JobEvent& event : job.events()) {
      absl::StrAppend(text, "  ", FormatUnixMillis(event.time_unix_ms()), "  ", event.message(),
                      "\n");
    }
  }
}

// What each rank reported it holds after its first step, beside the prediction for its rank
// (plan/memory_plan.h) under the job's strategy, and how much its heap grew by the allocator's
// counters ("-" when not measured). Nothing until a rank has reported.
void AppendMemory(const v1::JobStatus& job, std::string* text) {
  Table memory({"RANK", "TOTAL", "PREDICTED", "PARAMETERS", "GRADIENTS", "OPTIMIZER",
                "COMM_BUFFERS", "HEAP_GROWTH"},
               "  ");
  v1::JobSpec spec = job.spec();
  ApplyJobSpecDefaults(&spec);  // the coordinator stores it completed; an older one may not
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!rank.has_memory()) continue;
    const v1::RankMemory& held = rank.memory();
    absl::StatusOr<v1::RankMemory> predicted =
        PredictRankMemory(spec, spec.strategy(), spec.world_size(), rank.rank());
    std::string expected = "-";
    if (predicted.ok()) {
      expected = predicted->total_bytes() == held.total_bytes()
                     ? absl::StrCat(FormatBytes(predicted->total_bytes()), " (equal)")
                     : FormatBytes(predicted->total_bytes());
    }
    memory.AddRow({absl::StrCat(rank.rank()),
                   absl::StrCat(FormatBytes(held.total_bytes()), " (", held.total_bytes(), " B)"),
                   expected, FormatBytes(held.parameter_bytes()),
                   FormatBytes(held.gradient_bytes()), FormatBytes(held.optimizer_bytes()),
                   FormatBytes(held.comm_buffer_bytes()),
                   held.allocator_bytes() > 0 ? FormatBytes(held.allocator_bytes()) : "-"});
  }
  if (memory.rows() == 0) return;
  absl::StrAppend(text, "\nmemory per rank (measured after its first step)\n", memory.Render(),
                  "HEAP_GROWTH: the C heap's high-water growth through the first step (glibc's "
                  "counters):\n  activations, scratch and library buffers included\n");
}

// "coordinator: HOST:PORT (leader)" when the client had a choice of coordinators (a list, or a
// standby that sent the call on): which one answered. Nothing for a single coordinator.
void PrintAnsweringLeader(const JobClient& client, const CommandEnvironment& env) {
  const std::string leader = client.AnsweringLeader();
  if (!leader.empty()) *env.out << "coordinator: " << leader << " (leader)\n";
}

}  // namespace

std::string FormatJobStatus(const v1::JobStatus& job) {
  std::string text = absl::StrCat("job          ", job.job_id(),
                                  job.spec().name().empty() ? "" : "  " + job.spec().name(), "\n");
  absl::StrAppend(&text, "state        ", JobStateName(job.state()), "\n");
  const std::string waiting = WaitingReason(job);
  if (!waiting.empty()) absl::StrAppend(&text, "waiting      ", waiting, "\n");
  if (job.archived()) {
    absl::StrAppend(&text,
                    "archived     yes: its final status, from the coordinator's job store (its "
                    "metrics and logs are no longer kept)\n");
  }
  absl::StrAppend(&text, "generation   ", job.generation(), "\n");
  absl::StrAppend(&text, "fingerprint  ", job.spec_fingerprint(), "\n");
  absl::StrAppend(&text, "spec         ", SummarizeSpec(job.spec()), "\n");
  absl::StrAppend(&text, "submitted    ", FormatUnixMillis(job.submit_time_unix_ms()), "\n");
  if (!job.checkpoint_path().empty()) {
    absl::StrAppend(&text, "checkpoint   ", job.checkpoint_path(), "\n");
  }
  if (!job.last_checkpoint().empty()) {
    absl::StrAppend(&text, "last ckpt    step ", job.last_checkpoint_step(), ": ",
                    job.last_checkpoint(), "\n");
  }
  if (job.spec().has_max_restarts()) {
    absl::StrAppend(&text, "restarts     ", job.restarts(), " of ", job.spec().max_restarts(),
                    "\n");
  }
  if (job.spec().spares() > 0) {
    absl::StrAppend(&text, "spares       ", job.spare_workers_size(), " of ", job.spec().spares(),
                    " held", job.spare_workers().empty() ? "" : ": ",
                    absl::StrJoin(job.spare_workers(), ", "), "\n");
  }
  absl::StrAppend(&text, "verdict      ", SummarizeVerdict(job.verdict()), "\n");

  Table transitions({"TIME", "STATE", "REASON"}, "  ");
  for (const v1::StateTransition& transition : job.transitions()) {
    transitions.AddRow({FormatUnixMillis(transition.time_unix_ms()),
                        JobStateName(transition.state()), transition.reason()});
  }
  absl::StrAppend(&text, "\ntransitions\n", transitions.Render());
  AppendAttemptsAndEvents(job, &text);

  Table ranks({"RANK", "WORKER", "HOST", "STATE", "STEP", "EPOCH", "LOSS", "LOCAL_GRAD",
               "SYNCED_GRAD", "DRIFT", "STEP_MS", "COMM_MS", "HIDDEN_MS", "HEARTBEAT"},
              "  ");
  std::vector<std::string> errors;
  for (const v1::RankStatus& rank : job.ranks()) {
    const v1::StepReport& step = rank.last_step();
    const bool stepped = rank.has_last_step();
    auto number = [&](double value) { return stepped ? FormatNumber(value) : "-"; };
    ranks.AddRow({absl::StrCat(rank.rank()),
                  rank.worker_name().empty() ? rank.worker_id() : rank.worker_name(), rank.host(),
                  RankState(rank), stepped ? absl::StrCat(step.step()) : "-",
                  stepped ? absl::StrCat(step.epoch()) : "-", number(step.loss()),
                  number(step.local_grad_norm()), number(step.synced_grad_norm()),
                  stepped && step.has_drift() ? FormatNumber(step.drift()) : "-",
                  number(step.step_ms()), number(step.comm_ms()),
                  number(step.overlapped_comm_ms()),
                  rank.worker_id().empty() ? "-" : FormatAgeMillis(rank.heartbeat_age_ms())});
    if (!rank.error().empty())
      errors.push_back(absl::StrCat("  rank ", rank.rank(), ": ", rank.error()));
  }
  absl::StrAppend(&text, "\nranks\n", ranks.Render());
  // Where each rank is while the attempt runs (its last report or keepalive).
  bool any_activity = false;
  Table activity({"RANK", "PHASE", "SILENT", "PROCESS"}, "  ");
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!rank.has_activity()) continue;
    any_activity = true;
    activity.AddRow({absl::StrCat(rank.rank()), DescribeActivity(rank.activity()),
                     rank.silent_ms() < 0 ? "-" : ShortDuration(absl::Milliseconds(rank.silent_ms())),
                     rank.process_state().empty() ? "-" : rank.process_state()});
  }
  if (any_activity) absl::StrAppend(&text, "\nactivity\n", activity.Render());
  AppendMemory(job, &text);
  if (!errors.empty()) absl::StrAppend(&text, "\nrank errors\n", absl::StrJoin(errors, "\n"), "\n");

  if (job.alarms_size() > 0) {
    absl::StrAppend(&text, "\nalarms\n");
    for (const v1::Alarm& alarm : job.alarms()) {
      absl::StrAppend(&text, "  ", FormatAlarm(alarm), "\n");
    }
  }
  if (job.stragglers_size() > 0) {
    absl::StrAppend(&text, "\nstragglers\n", FormatStragglers(job.stragglers(), "  "));
  }

  if (job.epochs_size() > 0) {
    Table epochs({"EPOCH", "TEST_ACCURACY", "TEST_LOSS", "TRAIN_LOSS"}, "  ");
    for (const v1::EpochReport& epoch : job.epochs()) {
      epochs.AddRow({absl::StrCat(epoch.epoch()), FormatNumber(epoch.test_accuracy()),
                     FormatNumber(epoch.test_loss()), FormatNumber(epoch.train_loss())});
    }
    absl::StrAppend(&text, "\nepochs\n", epochs.Render());
  }
  return text;
}

int RunStatus(const std::string& job_id, JobClient& client, const CommandEnvironment& env) {
  absl::StatusOr<v1::GetJobResponse> response = client.Get(job_id);
  if (!response.ok()) return ReportError(response.status(), "cannot get job " + job_id, env);
  if (env.json) return PrintJson(response->job(), env);
  *env.out << FormatJobStatus(response->job());
  PrintAnsweringLeader(client, env);
  return kExitOk;
}

absl::StatusOr<v1::JobState> ParseJobStateName(const std::string& name) {
  const std::string wanted = absl::AsciiStrToUpper(absl::StrCat("JOB_STATE_", name));
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  if (v1::JobState_Parse(wanted, &state) && state != v1::JOB_STATE_UNSPECIFIED) return state;
  return absl::InvalidArgumentError(absl::StrCat(
      "--state: unknown job state '", name,
      "' (expected queued, rendezvous, running, succeeded, failed or cancelled)"));
}

int RunList(const ListOptions& options, JobClient& client, const CommandEnvironment& env) {
  absl::StatusOr<v1::ListJobsResponse> response = client.List(options.archived);
  if (!response.ok()) return ReportError(response.status(), "cannot list jobs", env);
  if (!options.states.empty()) {
    auto* jobs = response->mutable_jobs();
    jobs->erase(std::remove_if(jobs->begin(), jobs->end(),
                               [&](const v1::JobStatus& job) {
                                 return absl::c_find(options.states, job.state()) ==
                                        options.states.end();
                               }),
                jobs->end());
  }
  if (options.limit > 0 && static_cast<size_t>(response->jobs_size()) > options.limit) {
    // The most recently submitted ones, still in the coordinator's order.
    std::vector<int64_t> times;
    for (const v1::JobStatus& job : response->jobs()) times.push_back(job.submit_time_unix_ms());
    std::nth_element(times.begin(), times.begin() + (options.limit - 1), times.end(),
                     std::greater<int64_t>());
    const int64_t cutoff = times[options.limit - 1];
    v1::ListJobsResponse kept;
    size_t at_cutoff = 0;
    for (size_t i = 0; i < options.limit; ++i) at_cutoff += times[i] == cutoff ? 1 : 0;
    for (const v1::JobStatus& job : response->jobs()) {
      if (job.submit_time_unix_ms() > cutoff ||
          (job.submit_time_unix_ms() == cutoff && at_cutoff-- > 0)) {
        *kept.add_jobs() = job;
      }
    }
    *response = std::move(kept);
  }
  if (env.json) return PrintJson(*response, env);
  if (response->jobs_size() == 0) {
    *env.out << (options.states.empty() ? "no jobs\n" : "no jobs in that state\n");
    return kExitOk;
  }
  // Why each QUEUED job waits, in a last column that only appears while one does.
  const bool any_waiting = absl::c_any_of(
      response->jobs(), [](const v1::JobStatus& job) { return !WaitingReason(job).empty(); });
  std::vector<std::string> headers = {"JOB",  "NAME", "STATE",    "WORLD",    "BACKEND",
                                      "GEN",  "STEP", "ACCURACY", "SUBMITTED"};
  if (any_waiting) headers.push_back("WAITING");
  Table table(std::move(headers));
  for (const v1::JobStatus& job : response->jobs()) {
    std::vector<std::string> row = {
        job.job_id(), job.spec().name().empty() ? "-" : job.spec().name(),
        job.archived() ? absl::StrCat(JobStateName(job.state()), " (archived)")
                       : JobStateName(job.state()),
        absl::StrCat(job.spec().world_size()), job.spec().backend(),
        absl::StrCat(job.generation()), SlowestStep(job),
        job.epochs_size() > 0 ? FormatNumber(job.epochs(job.epochs_size() - 1).test_accuracy())
                              : "-",
        FormatUnixMillis(job.submit_time_unix_ms())};
    if (any_waiting) {
      const std::string waiting = WaitingReason(job);
      row.push_back(waiting.empty() ? "-" : waiting);
    }
    table.AddRow(std::move(row));
  }
  *env.out << table.Render();
  return kExitOk;
}

int RunWorkers(JobClient& client, const CommandEnvironment& env) {
  absl::StatusOr<v1::ListWorkersResponse> response = client.ListWorkers();
  if (!response.ok()) return ReportError(response.status(), "cannot list workers", env);
  if (env.json) return PrintJson(*response, env);
  if (response->workers_size() == 0) {
    *env.out << "no workers registered\n";
    PrintAnsweringLeader(client, env);
    return kExitOk;
  }
  Table table(
      {"WORKER", "NAME", "HOST", "STATE", "DEVICES", "TOPOLOGY", "JOB", "RANK", "HEARTBEAT"});
  for (const v1::WorkerStatus& worker : response->workers()) {
    std::vector<std::string> devices;
    for (const v1::Device& device : worker.devices()) devices.push_back(FormatDevice(device));
    const bool busy = !worker.job_id().empty();
    table.AddRow({worker.worker_id(), worker.name(), worker.host(), WorkerStateName(worker.state()),
                  absl::StrJoin(devices, ","),
                  worker.topology().empty() ? worker.host() : worker.topology(),
                  busy ? worker.job_id() : "-",
                  busy ? absl::StrCat(worker.rank()) : "-",
                  FormatAgeMillis(worker.heartbeat_age_ms())});
  }
  *env.out << table.Render();
  bool heading = false;
  for (const v1::WorkerStatus& worker : response->workers()) {
    if (worker.quarantine_reason().empty()) continue;
    if (!heading) *env.out << "\nquarantined (release with `ringleader uncordon WORKER`)\n";
    heading = true;
    *env.out << "  " << worker.name() << ": " << worker.quarantine_reason() << "\n";
  }
  PrintAnsweringLeader(client, env);
  return kExitOk;
}

int RunCancel(const std::string& job_id, const std::string& reason, JobClient& client,
              const CommandEnvironment& env) {
  absl::StatusOr<v1::CancelJobResponse> response = client.Cancel(job_id, reason);
  if (!response.ok()) return ReportError(response.status(), "cannot cancel job " + job_id, env);
  if (env.json) return PrintJson(*response, env);
  *env.out << "cancelled job " << job_id << "\n";
  return kExitOk;
}

}  // namespace ringleader
