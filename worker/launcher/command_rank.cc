#include "worker/launcher/command_rank.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "common/job_spec.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/daemon/child_process.h"
#include "worker/launcher/command_env.h"
#include "worker/launcher/output_tail.h"
#include "worker/rank/finish_report.h"
#include "worker/rank/progress_reporter.h"
#include "worker/rank/rank_activity.h"

namespace ringleader {
namespace {

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) return entry.substr(prefix.size());
  }
  return "";
}

// "command exited with code 1: ValueError: boom" plus the last lines of stderr.
std::string DescribeFailure(const ExitInfo& exit, const std::vector<std::string>& stderr_tail) {
  std::vector<std::string> lines;
  for (const std::string& line : stderr_tail) {
    if (!absl::StripAsciiWhitespace(line).empty()) lines.push_back(line);
  }
  std::string message = absl::StrCat("command ", exit.Describe());
  if (lines.empty()) return absl::StrCat(message, " (its stderr was empty)");
  absl::StrAppend(&message, ": ", absl::StripAsciiWhitespace(lines.back()),
                  "\nlast lines of its stderr:\n", absl::StrJoin(lines, "\n"));
  return message;
}

// What the command's ringleader package wrote to the failure file (RINGLEADER_FAILURE_FILE):
// JOB_ERROR when the script raised ringleader.JobError; nullopt when it wrote nothing.
std::optional<v1::RankFailure::Kind> KindTheScriptSaid(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  v1::RankFailure::Kind kind = v1::RankFailure::KIND_UNSPECIFIED;
  if (!v1::RankFailure::Kind_Parse(word, &kind) || kind != v1::RankFailure::JOB_ERROR) {
    return std::nullopt;
  }
  return kind;
}

// MASTER_ADDR and MASTER_PORT for this attempt: rank 0 reserves and publishes, others read.
absl::StatusOr<std::pair<std::string, int>> AgreeOnMaster(const v1::Assignment& assignment,
                                                          const CommandRankOptions& options) {
  if (assignment.rank() == 0) {
    absl::StatusOr<int> port = ReserveFreePort(options.collective_host);
    if (!port.ok()) return port.status();
    absl::Status published = options.store->Set(
        kTorchMasterKey, absl::StrCat(options.collective_host, ":", *port));
    if (!published.ok()) return published;
    return std::make_pair(options.collective_host, *port);
  }
  absl::StatusOr<std::string> master =
      options.store->Get(kTorchMasterKey, options.rendezvous_timeout);
  if (!master.ok()) {
    return WithPrefix(master.status(), "waiting for rank 0's MASTER_ADDR:MASTER_PORT: ");
  }
  const size_t colon = master->rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(master->substr(colon + 1), &port)) {
    return absl::InternalError(absl::StrCat("rank 0 published a bad address '", *master, "'"));
  }
  return std::make_pair(master->substr(0, colon), port);
}

}  // namespace

RankRunResult RunCommandRank(const v1::Assignment& assignment, CoordinatorClient* client,
                             const CommandRankOptions& options) {
  const v1::JobSpec& spec = assignment.spec();
  RankRunResult result;
  // `kind`: what this launcher knows of a failure (an inner failure's kind stays).
  auto finish = [&](const absl::Status& status, v1::RankFailure::Kind kind) {
    result.status = WithFailureKind(status, kind);
    v1::FinishRankRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_rank(assignment.rank());
    request.set_ok(status.ok());
    if (!status.ok()) {
      request.set_error(std::string(status.message()));
      *request.mutable_failure() = FailureOf(result.status);
    }
    result.finish_reported = DeliverFinishRank(client, request, options.coordinator_grace,
                                               options.coordinator_retry_pause);
    return result;
  };

  // What this worker can check before anyone waits for it: a job error (every worker of a
  // cluster is set up alike, so a restart would fail the same way).
  const std::string workdir = spec.workdir().empty() ? options.default_workdir : spec.workdir();
  std::error_code error;
  if (!std::filesystem::is_directory(workdir, error)) {
    return finish(absl::NotFoundError(absl::StrCat("workdir: '", workdir,
                                                   "' is not a directory on this worker; "
                                                   "create it or fix the spec")),
                  v1::RankFailure::JOB_ERROR);
  }
  CommandEnvInputs inputs;
  inputs.inherited = options.inherited_env;
  inputs.coordinator_address = options.coordinator_address;
  inputs.tls_dir = options.tls_dir;
  inputs.python_path = options.python_path;
  inputs.gpu = options.gpu;
  inputs.snapshot_dir = options.snapshot_dir;
  if (!spec.checkpoint_dir().empty()) {
    inputs.checkpoint_dir =
        (std::filesystem::path(spec.checkpoint_dir()) / assignment.job_id()).string();
    std::filesystem::create_directories(inputs.checkpoint_dir, error);
  }
  // The worker's own GPUs disagreeing with the assignment is this worker's failure (its
  // setup), not the job's: it may run elsewhere.
  absl::StatusOr<std::vector<std::string>> draft_env = CommandEnvironment(assignment, inputs);
  if (!draft_env.ok()) return finish(draft_env.status(), v1::RankFailure::KIND_UNSPECIFIED);
  absl::StatusOr<std::string> program =
      ResolveProgram(spec.command(0), EnvValue(*draft_env, "PATH"), workdir);
  if (!program.ok()) {
    return finish(program.status(), v1::RankFailure::JOB_ERROR);
  }

  v1::JoinJobRequest join;
  join.set_job_id(assignment.job_id());
  join.set_generation(assignment.generation());
  join.set_rank(assignment.rank());
  join.set_worker_id(options.worker_id);
  join.set_spec_fingerprint(JobSpecFingerprint(spec));
  if (absl::StatusOr<v1::JoinJobResponse> joined = client->JoinJob(join); !joined.ok()) {
    return finish(joined.status(), v1::RankFailure::KIND_UNSPECIFIED);
  }
  absl::StatusOr<std::pair<std::string, int>> master = AgreeOnMaster(assignment, options);
  if (!master.ok()) return finish(master.status(), v1::RankFailure::KIND_UNSPECIFIED);
  inputs.master_addr = master->first;
  inputs.master_port = master->second;

  // The launcher's keepalives say the command runs (the program's own reports, through the
  // Python hook, go out separately).
  RankActivityTracker activity;
  activity.Set(v1::RANK_PHASE_RUNNING_COMMAND, spec.command(0));
  ProgressReporterOptions reporting;
  reporting.keepalive_interval = options.keepalive_interval;
  reporting.activity = [&activity] { return activity.Current(); };
  ProgressReporter reporter(client, assignment.job_id(), assignment.generation(),
                            assignment.rank(), reporting);

  absl::StatusOr<std::unique_ptr<OutputTail>> tail =
      OutputTail::Create(options.stderr_tee_fd, options.quoted_stderr_lines);
  if (!tail.ok()) return finish(tail.status(), v1::RankFailure::KIND_UNSPECIFIED);
  ChildOptions child_options;
  absl::StatusOr<std::vector<std::string>> env = CommandEnvironment(assignment, inputs);
  if (!env.ok()) return finish(env.status(), v1::RankFailure::INTERNAL);  // passed above
  child_options.env = *std::move(env);
  // Where the script's ringleader package says a failure is the job's (ringleader.JobError).
  const std::string failure_file =
      (std::filesystem::path(options.default_workdir) / kCommandFailureFile).string();
  std::filesystem::remove(failure_file, error);
  child_options.env->push_back(absl::StrCat("RINGLEADER_FAILURE_FILE=", failure_file));
  child_options.workdir = workdir;
  child_options.stderr_fd = (*tail)->write_fd();
  child_options.own_process_group = false;
  std::vector<std::string> argv(spec.command().begin(), spec.command().end());
  argv[0] = *program;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, child_options);
  (*tail)->CloseWriteEnd();
  if (!child.ok()) return finish(child.status(), v1::RankFailure::JOB_ERROR);

  absl::Notification exited;
  ExitInfo exit;
  std::thread waiter([&] {
    exit = (*child)->Wait();
    exited.Notify();
  });
  bool stopped = false;
  while (!exited.WaitForNotificationWithTimeout(options.stop_poll_interval)) {
    if (!stopped && reporter.stopped_by_coordinator()) {
      stopped = true;
      std::cerr << "[ringleader-rank] " << reporter.status().message()
                << "; stopping the command" << std::endl;
      (*child)->Terminate(options.kill_grace);
    }
  }
  waiter.join();
  const std::vector<std::string> stderr_tail = (*tail)->Finish(absl::Seconds(2));
  if (exit.success()) {
    // As the built-in trainer's rank does: a job that ended here needs its snapshots no more
    // (they take the worker's memory). A failed command leaves them to its next attempt.
    if (!options.snapshot_dir.empty()) std::filesystem::remove_all(options.snapshot_dir, error);
    return finish(absl::OkStatus(), v1::RankFailure::KIND_UNSPECIFIED);
  }
  // The script's word (it raised ringleader.JobError), else its end: the coordinator's stop,
  // a signal (with its number), or an exit code.
  v1::RankFailure failure = ExitFailure(exit, stopped);
  if (std::optional<v1::RankFailure::Kind> said = KindTheScriptSaid(failure_file)) {
    failure.set_kind(*said);
  }
  return finish(WithRankFailure(absl::UnknownError(DescribeFailure(exit, stderr_tail)), failure),
                failure.kind());
}

}  // namespace ringleader
