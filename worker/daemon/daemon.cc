#include "worker/daemon/daemon.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/file_names.h"
#include "worker/daemon/job_paths.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

constexpr char kAssignmentFile[] = "assignment.pb";
constexpr char kLogFile[] = "rank.log";
constexpr char kRotatedLogFile[] = "rank.log.1";
constexpr char kReportMarkerFile[] = "finish_reported";
// How much of the child's log the failure report quotes.
constexpr size_t kMaxQuotedOutput = 300;

void Log(const std::string& line) { std::cerr << "[ringleader-worker] " << line << std::endl; }

uint64_t RandomIncarnation() {
  absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen) | 1;  // never 0, which means "pick one"
}

absl::Status ValidateOptions(const WorkerDaemonOptions& o) {
  if (o.name.empty()) return absl::InvalidArgumentError("worker name: must not be empty");
  if (o.host.empty()) return absl::InvalidArgumentError("worker host: must not be empty");
  if (o.devices.empty()) return absl::InvalidArgumentError("worker devices: need at least one");
  if (o.coordinator_address.empty()) {
    return absl::InvalidArgumentError("coordinator address: must not be empty (--coordinator)");
  }
  if (o.work_dir.empty()) return absl::InvalidArgumentError("work dir: must not be empty");
  if (o.rank_binary.empty()) {
    return absl::InvalidArgumentError("rank binary: must not be empty (--rank_binary)");
  }
  if (o.wait_assignment_timeout <= absl::ZeroDuration() || o.kill_grace < absl::ZeroDuration() ||
      o.retry_interval <= absl::ZeroDuration() ||
      o.default_heartbeat_interval <= absl::ZeroDuration() ||
      o.default_coordinator_grace < absl::ZeroDuration() ||
      o.log_ship_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "daemon timings: wait_assignment_timeout, retry_interval, default_heartbeat_interval "
        "and log_ship_interval must be positive, kill_grace and coordinator_grace "
        "non-negative");
  }
  return absl::OkStatus();
}

// The last non-empty line of `path` (at most kMaxQuotedOutput characters), or "".
std::string LastLineIn(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 4096);
  in.seekg(start);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::string_view text = absl::StripTrailingAsciiWhitespace(tail);
  const size_t newline = text.rfind('\n');
  if (newline != absl::string_view::npos) text = text.substr(newline + 1);
  return std::string(text.substr(0, kMaxQuotedOutput));
}

// The child's last line of output: in rank.log, or in rank.log.1 when a rotation just emptied
// rank.log.
std::string LastLineOf(const fs::path& dir) {
  std::string last = LastLineIn(dir / kLogFile);
  return last.empty() ? LastLineIn(dir / kRotatedLogFile) : last;
}

}  // namespace

std::string AttemptDirName(const v1::Assignment& assignment) {
  return absl::StrCat(SafeFileName(assignment.job_id()), "-g", assignment.generation(), "-r",
                      assignment.rank());
}

WorkerDaemon::WorkerDaemon(CoordinatorClient* client, WorkerDaemonOptions options)
    : client_(client),
      options_(std::move(options)),
      incarnation_(options_.incarnation != 0 ? options_.incarnation : RandomIncarnation()),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      heartbeat_interval_(options_.default_heartbeat_interval),
      coordinator_grace_(options_.default_coordinator_grace) {}

WorkerDaemon::~WorkerDaemon() { Stop(); }

std::string WorkerDaemon::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

int WorkerDaemon::attempts_started() const {
  absl::MutexLock lock(&mu_);
  return attempts_started_;
}

WorkerDaemon::Lease WorkerDaemon::lease() const {
  absl::MutexLock lock(&mu_);
  return Lease{worker_id_, lease_epoch_};
}

absl::Duration WorkerDaemon::heartbeat_interval() const {
  absl::MutexLock lock(&mu_);
  return heartbeat_interval_;
}

void WorkerDaemon::Stop() {
  bool child_running = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    if (child_ != nullptr) {
      child_running = true;
      child_->Terminate(options_.kill_grace);
    }
  }
  stop_.Notify();
  // With a child running, Run() still reports its end before leaving (and cancels then);
  // otherwise Run() is most likely inside a long poll that must be cut short now.
  if (!child_running) client_->CancelAll();
}

bool WorkerDaemon::Register(uint64_t stale_epoch) {
  absl::MutexLock registration(&register_mu_);
  v1::RegisterWorkerRequest request;
  uint64_t running_child = 0;  // the child named in the request (its serial), 0 = none
  {
    absl::MutexLock lock(&mu_);
    // Another thread registered meanwhile. (Comparing ids would not do: registering again
    // with the same incarnation gives the same id, and a late second registration would kill
    // the rank the renewed lease already runs.)
    if (lease_epoch_ != stale_epoch) return true;
    // A rank of the lost lease still running: ask the coordinator to take it back.
    if (stale_epoch != 0 && child_ != nullptr && !running_abandoned_) {
      running_child = child_serial_;
      request.mutable_running()->set_job_id(running_.job_id);
      request.mutable_running()->set_generation(running_.generation);
      request.set_running_rank(running_.rank);
    }
  }
  request.set_name(options_.name);
  request.set_host(options_.host);
  request.set_topology(options_.topology);
  request.set_incarnation(incarnation_);
  for (const v1::Device& device : options_.devices) *request.add_devices() = device;
  absl::StatusOr<v1::RegisterWorkerResponse> response = client_->RegisterWorker(request);
  if (!response.ok()) {
    if (!stop_.HasBeenNotified()) {
      Log(absl::StrCat("registration failed: ", response.status().ToString()));
    }
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    worker_id_ = response->worker_id();
    ++lease_epoch_;
    heartbeat_interval_ = response->heartbeat_interval_ms() > 0
                              ? absl::Milliseconds(response->heartbeat_interval_ms())
                              : options_.default_heartbeat_interval;
    heartbeat_timeout_ = absl::Milliseconds(response->heartbeat_timeout_ms());
    if (response->has_coordinator_grace_ms()) {
      coordinator_grace_ = absl::Milliseconds(response->coordinator_grace_ms());
    }
    last_reached_ = clock_->Now();
  }
  if (options_.on_lease_change) options_.on_lease_change(true);
  Log(absl::StrCat(stale_epoch == 0 ? "registered" : "registered again", " as ",
                   response->worker_id(), " (name ", options_.name, ", incarnation ", incarnation_,
                   ")"));
  if (request.has_running()) {
    Log(absl::StrCat("rank ", request.running_rank(), " of job ", request.running().job_id(),
                     response->running_kept()
                         ? " goes on: the coordinator took it back"
                         : absl::StrCat(" must stop: ", response->running_refused())));
  }
  // A lost lease whose rank was not taken back: the coordinator failed that attempt already.
  // (Only that child: one started meanwhile came from the renewed registration.)
  if (running_child != 0 && !response->running_kept()) {
    AbandonChild(running_child,
                 "the worker's lease was lost (its attempt is over; not reporting it)");
  }
  return true;
}

bool WorkerDaemon::OutageExceedsGrace(bool reachable) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (reachable) {
    last_reached_ = now;
    return false;
  }
  return now - last_reached_ > coordinator_grace_;
}

std::string WorkerDaemon::RankProcessState() const {
  pid_t pid = 0;
  {
    absl::MutexLock lock(&mu_);
    if (child_ == nullptr) return "";
    pid = child_->pid();
  }
  return ProcessState(pid);  // read after the unlock
}

void WorkerDaemon::HeartbeatLoop() {
  {
    // The interval comes with the first registration: wait for it rather than guess.
    absl::MutexLock lock(&mu_);
    auto registered_or_stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !worker_id_.empty() || stopping_;
    };
    mu_.Await(absl::Condition(&registered_or_stopping));
  }
  bool failing = false;  // log only the first failure of a streak
  while (!stop_.WaitForNotificationWithTimeout(heartbeat_interval())) {
    const Lease current = lease();
    if (current.worker_id.empty()) continue;
    v1::HeartbeatRequest request;
    request.set_worker_id(current.worker_id);
    request.set_incarnation(incarnation_);
    request.set_rank_process_state(RankProcessState());
    absl::StatusOr<v1::HeartbeatResponse> response = client_->Heartbeat(request);
    if (stop_.HasBeenNotified()) return;
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kNotFound) {
        Log(absl::StrCat("heartbeat: ", response.status().ToString(), "; registering again"));
        if (options_.on_lease_change) options_.on_lease_change(false);
        // A coordinator back only after the grace: the rank must not rejoin (the restarted
        // coordinator restarts the job from its checkpoint once this worker says so).
        if (OutageExceedsGrace(/*reachable=*/false)) {
          AbandonChild(0, "the coordinator came back only after its grace");
        }
        Register(current.epoch);
      } else {
        if (!failing) {
          Log(absl::StrCat("heartbeat failed: ", response.status().ToString(),
                           "; a running rank goes on for the coordinator's grace"));
        }
        if (OutageExceedsGrace(/*reachable=*/false)) {
          AbandonChild(
              0,
              "the coordinator has been unreachable for longer than its grace (the job "
              "restarts from its last checkpoint once the coordinator is back)");
        }
      }
      failing = true;
      continue;
    }
    OutageExceedsGrace(/*reachable=*/true);
    failing = false;
    for (const v1::JobAttempt& attempt : response->abort()) {
      TerminateChild(&attempt, "the coordinator aborted the attempt");
    }
  }
}

void WorkerDaemon::TerminateChild(const v1::JobAttempt* attempt, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (child_ == nullptr) return;
  if (attempt != nullptr &&
      (attempt->job_id() != running_.job_id || attempt->generation() != running_.generation)) {
    return;
  }
  if (!child_->terminate_requested()) {
    Log(absl::StrCat("stopping rank ", running_.rank, " of job ", running_.job_id, ": ", why));
  }
  child_->Terminate(options_.kill_grace);
}

void WorkerDaemon::AbandonChild(uint64_t serial, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (child_ == nullptr || (serial != 0 && child_serial_ != serial)) return;
  running_abandoned_ = true;
  if (!child_->terminate_requested()) {
    Log(absl::StrCat("stopping rank ", running_.rank, " of job ", running_.job_id, ": ", why));
  }
  child_->Terminate(options_.kill_grace);
}

std::string WorkerDaemon::SnapshotDirFor(const v1::Assignment& assignment) const {
  if (options_.snapshot_dir.empty()) return "";
  const std::string job = SafeFileName(assignment.job_id());
  // One job's snapshots at a time: another job's are of no use any more (memory is scarce).
  std::error_code error;
  for (fs::directory_iterator it(options_.snapshot_dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename() != job) fs::remove_all(it->path(), error);
  }
  return (fs::path(options_.snapshot_dir) / job).string();
}

absl::Status WorkerDaemon::Run() {
  if (absl::Status status = ValidateOptions(options_); !status.ok()) return status;
  if (!options_.snapshot_dir.empty()) {
    // Snapshots an earlier daemon left belong to attempts this one knows nothing of.
    std::error_code error;
    fs::remove_all(options_.snapshot_dir, error);
    Log(absl::StrCat("snapshots in memory of the ranks go to ", options_.snapshot_dir,
                     " (--snapshot_dir)"));
  }
  absl::StatusOr<AllowedRoots> roots = AllowedRoots::Create(options_.allowed_roots);
  if (!roots.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("allowed roots (--allowed_roots): ", roots.status().message()));
  }
  allowed_roots_ = *std::move(roots);
  if (allowed_roots_.confining()) {
    Log(absl::StrCat("job paths (checkpoint_dir, data.path, model.init_from, workdir) must lie "
                     "in the allowed roots: ",
                     allowed_roots_.Describe(), " (--allowed_roots)"));
  } else {
    Log("WARNING: job paths are not confined: a job spec may name any path this user can read "
        "or write (checkpoint_dir, data.path, model.init_from, workdir); set --allowed_roots");
  }
  std::error_code error;
  fs::create_directories(options_.work_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("work dir '", options_.work_dir, "' cannot be created: ", error.message()));
  }
  std::thread heartbeats(&WorkerDaemon::HeartbeatLoop, this);
  while (!stop_.HasBeenNotified()) {
    const Lease current = lease();
    if (current.worker_id.empty()) {
      if (!Register(0)) stop_.WaitForNotificationWithTimeout(options_.retry_interval);
      continue;
    }
    v1::WaitAssignmentRequest request;
    request.set_worker_id(current.worker_id);
    request.set_incarnation(incarnation_);
    request.set_wait_timeout_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.wait_assignment_timeout)));
    {
      absl::MutexLock lock(&mu_);
      if (last_started_.has_value()) {
        request.mutable_last_started()->set_job_id(last_started_->job_id);
        request.mutable_last_started()->set_generation(last_started_->generation);
      }
    }
    absl::StatusOr<v1::WaitAssignmentResponse> response = client_->WaitAssignment(request);
    if (stop_.HasBeenNotified()) break;
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kNotFound) {
        if (options_.on_lease_change) options_.on_lease_change(false);
        if (Register(current.epoch)) continue;
      } else {
        Log(absl::StrCat("waiting for an assignment failed: ", response.status().ToString()));
      }
      stop_.WaitForNotificationWithTimeout(options_.retry_interval);
      continue;
    }
    if (response->has_assignment()) {
      // The daemon reports for its rank (FinishRank of a dead rank, its logs) with the token.
      const v1::Assignment& assignment = response->assignment();
      client_->AddAttemptToken(assignment.job_id(), assignment.generation(),
                               assignment.attempt_token());
      RunAttempt(assignment);
    }
  }
  client_->CancelAll();
  heartbeats.join();
  if (options_.on_lease_change) options_.on_lease_change(false);
  if (!options_.snapshot_dir.empty()) {
    std::error_code error;
    fs::remove_all(options_.snapshot_dir, error);  // no rank of this daemon resumes from them
  }
  Log("stopped");
  return absl::OkStatus();
}

void WorkerDaemon::RunAttempt(const v1::Assignment& assignment) {
  const std::string what = absl::StrCat("rank ", assignment.rank(), " of job ", assignment.job_id(),
                                        " (generation ", assignment.generation(), ")");
  // `kind`: what the daemon knows of the failure (JOB_ERROR: the coordinator fails the job
  // without a restart); `failure` its facts, when it has more (a signal's number).
  auto report_failure = [&](const std::string& error, v1::RankFailure::Kind kind,
                            v1::RankFailure failure = {}) {
    v1::FinishRankRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_rank(assignment.rank());
    request.set_ok(false);
    request.set_error(error);
    failure.set_kind(kind);
    *request.mutable_failure() = failure;
    // While the coordinator is unreachable (the client's own retries ran out) the report is
    // tried again, for as long as a rank would have been kept running without it.
    const absl::Time give_up = clock_->Now() + [&] {
      absl::MutexLock lock(&mu_);
      return coordinator_grace_;
    }();
    absl::StatusOr<v1::FinishRankResponse> response = client_->FinishRank(request);
    while (!response.ok() && response.status().code() == absl::StatusCode::kUnavailable &&
           clock_->Now() < give_up &&
           !stop_.WaitForNotificationWithTimeout(options_.retry_interval)) {
      response = client_->FinishRank(request);
    }
    // FAILED_PRECONDITION (stale generation) is expected when the attempt was aborted.
    if (!response.ok() && !stop_.HasBeenNotified()) {
      Log(absl::StrCat("reporting the failure of ", what, ": ", response.status().ToString()));
    }
  };

  // Confinement: a path outside the allowed roots is the spec's fault, and every worker of the
  // cluster would refuse it alike.
  if (absl::Status confined = CheckJobPaths(assignment, allowed_roots_); !confined.ok()) {
    Log(absl::StrCat("refusing ", what, ": ", confined.message()));
    report_failure(std::string(confined.message()), v1::RankFailure::JOB_ERROR);
    return;
  }

  const fs::path dir = fs::path(options_.work_dir) / AttemptDirName(assignment);
  const fs::path assignment_file = dir / kAssignmentFile;
  const fs::path marker = dir / kReportMarkerFile;
  std::error_code error;
  fs::create_directories(dir, error);
  // Leftovers from an earlier daemon using the same directory (an old rank.log.1 would pass for
  // this attempt's output).
  fs::remove(marker, error);
  fs::remove(dir / kLogFile, error);
  fs::remove(dir / kRotatedLogFile, error);
  {
    std::ofstream out(assignment_file, std::ios::binary | std::ios::trunc);
    if (!out || !assignment.SerializeToOstream(&out) || !out.flush()) {
      report_failure(
          absl::StrCat("worker ", options_.name, " could not write ", assignment_file.string()),
          v1::RankFailure::IO_ERROR);
      return;
    }
  }
  const std::string snapshots = SnapshotDirFor(assignment);
  std::vector<std::string> argv = {
      options_.rank_binary,
      absl::StrCat("--assignment=", assignment_file.string()),
      absl::StrCat("--coordinator=", options_.coordinator_address),
      absl::StrCat("--worker_id=", worker_id()),
      absl::StrCat("--report_marker=", marker.string()),
  };
  if (options_.gpu >= 0) argv.push_back(absl::StrCat("--gpu=", options_.gpu));
  if (!snapshots.empty()) argv.push_back(absl::StrCat("--snapshot_dir=", snapshots));
  {
    // A rank whose collective failed because a peer vanished waits, before reporting, until
    // the coordinator could have declared that peer's worker lost (heartbeat timeout plus one
    // interval and some slack): the job's failure then names the culprit, not this victim. The
    // wait ends early as soon as the coordinator says the attempt is over.
    absl::MutexLock lock(&mu_);
    if (heartbeat_timeout_ > absl::ZeroDuration()) {
      argv.push_back(absl::StrCat(
          "--victim_report_delay=",
          absl::FormatDuration(heartbeat_timeout_ + heartbeat_interval_ + absl::Milliseconds(500))));
    }
    // How long the rank keeps trying to deliver its last reports and its FinishRank while the
    // coordinator is unreachable.
    argv.push_back(absl::StrCat("--coordinator_grace=", absl::FormatDuration(coordinator_grace_)));
  }
  argv.insert(argv.end(), options_.rank_extra_args.begin(), options_.rank_extra_args.end());

  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start(argv, (dir / kLogFile).string());
  if (!child.ok()) {
    report_failure(absl::StrCat("worker ", options_.name,
                                " could not start the rank process: ", child.status().message()),
                   v1::RankFailure::KIND_UNSPECIFIED);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    child_ = child->get();
    running_ = AttemptKey{assignment.job_id(), assignment.generation(), assignment.rank()};
    ++child_serial_;
    running_abandoned_ = false;
    last_started_ = running_;
    ++attempts_started_;
    // Whichever registration the assignment came under, the coordinator checked this daemon's
    // incarnation: it is this worker's to run (a stale one is refused when the rank joins).
    if (stopping_) child_->Terminate(options_.kill_grace);
  }
  Log(absl::StrCat("started ", what, " as pid ", (*child)->pid(), ", log ",
                   (dir / kLogFile).string()));
  LogShipperOptions shipping;
  shipping.interval = options_.log_ship_interval;
  shipping.max_log_bytes = options_.max_log_bytes;
  LogShipper shipper(client_, assignment.job_id(), assignment.generation(), assignment.rank(),
                     (dir / kLogFile).string(), shipping);
  shipper.Start();
  const ExitInfo exit = (*child)->Wait();
  // The last output reaches the coordinator before the report below that it explains.
  shipper.Finish();
  const absl::StatusCode shipping_code = shipper.status().code();
  if (shipping_code != absl::StatusCode::kOk &&
      shipping_code != absl::StatusCode::kFailedPrecondition &&
      shipping_code != absl::StatusCode::kNotFound && !stop_.HasBeenNotified()) {
    Log(absl::StrCat("output of ", what, " was not shipped past byte ", shipper.shipped(), ": ",
                     shipper.status().ToString()));
  }
  const bool terminated = (*child)->terminate_requested();
  bool abandoned = false;
  {
    absl::MutexLock lock(&mu_);
    child_ = nullptr;
    abandoned = running_abandoned_;
  }
  const bool reported = fs::exists(marker, error);
  Log(absl::StrCat(what, " ", exit.Describe(), reported ? "" : " without reporting"));
  if (reported) return;  // the rank spoke for itself; its report counts
  if (abandoned) return;  // its lease was lost: see the file comment of daemon.h

  std::string message = absl::StrCat("rank process ", exit.Describe());
  if (exit.success()) absl::StrAppend(&message, " without reporting its result");
  if (terminated) absl::StrAppend(&message, " after the worker was told to stop it");
  const std::string last = LastLineOf(dir);
  if (!last.empty()) absl::StrAppend(&message, "; last output: ", last);
  const v1::RankFailure failure = ExitFailure(exit, terminated);
  report_failure(message, failure.kind(), failure);
}

}  // namespace ringleader
