#include "tests/e2e/cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/tls/tls_credentials.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;

// Pause between two checks of a polled condition.
constexpr absl::Duration kPollPause = absl::Milliseconds(20);
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

absl::Status ToStatus(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    kept.push_back(line);
    if (static_cast<int>(kept.size()) > lines) kept.pop_front();
  }
  return absl::StrJoin(kept, "\n");
}

// What /proc/PID/stat says of a process.
struct ProcStat {
  bool exists = false;
  char state = '?';  // R, S, D, T, Z, ...
  pid_t parent = 0;
  unsigned long long start_time = 0;
};

ProcStat ReadProcStat(pid_t pid) {
  ProcStat stat;
  const std::string text = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  // "PID (COMM) STATE PPID ..." where COMM may hold spaces and parentheses: fields are counted
  // after the last ')'.
  const size_t comm_end = text.rfind(')');
  if (comm_end == std::string::npos) return stat;
  const std::vector<std::string> fields =
      absl::StrSplit(text.substr(comm_end + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field N is fields[N - 3].
  if (fields.size() < 20 || fields[0].empty()) return stat;
  int parent = 0;
  if (!absl::SimpleAtoi(fields[1], &parent) || !absl::SimpleAtoi(fields[19], &stat.start_time)) {
    return stat;
  }
  stat.exists = true;
  stat.state = fields[0][0];
  stat.parent = parent;
  return stat;
}

}  // namespace

bool ProcessRunning(const ProcessRef& process) {
  const ProcStat stat = ReadProcStat(process.pid);
  return stat.exists && stat.start_time == process.start_time && stat.state != 'Z' &&
         stat.state != 'X';
}

absl::Status WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
                       const std::string& what) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("not within ", absl::FormatDuration(timeout), ": ", what));
    }
    absl::SleepFor(kPollPause);
  }
  return absl::OkStatus();
}

std::string RunfilePath(const std::string& relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  return (fs::path(srcdir ? srcdir : ".") / "ringleader" / relative).string();
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string LastReason(const v1::JobStatus& job) {
  return job.transitions().empty() ? "" : job.transitions().rbegin()->reason();
}

std::string DefaultAllowedRootsFlag() {
  const char* tmp = getenv("TEST_TMPDIR");
  std::error_code error;
  const fs::path root = fs::absolute(tmp ? tmp : "/tmp", error);
  return absl::StrCat("--allowed_roots=", root.string(), ",/usr/share/datasets/fashion-mnist");
}

v1::JobSpec SmallSyntheticSpec(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_world_size(2);
  spec.mutable_model()->set_kind("mlp");
  for (uint32_t width : {32u, 64u, 8u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(1024);
  spec.mutable_data()->set_max_test_examples(256);
  spec.set_epochs(1);
  spec.set_batch_size(32);
  spec.set_drift_interval_steps(4);
  spec.set_collective_timeout_ms(20000);
  // Most suites look at what one attempt's failure does; recovery_e2e_test sets restarts.
  spec.set_max_restarts(0);
  return spec;
}

v1::JobSpec UntilCancelledSpec(const std::string& name) {
  v1::JobSpec spec = SmallSyntheticSpec(name);
  // 256 steps an epoch for 10 000 epochs: 2.56 M steps, over ten minutes even at the ~4 000
  // steps a second two ranks sharing memory reach on this tiny model.
  spec.mutable_data()->set_max_train_examples(16384);
  spec.set_epochs(10000);
  return spec;
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const ClusterOptions& options) {
  std::unique_ptr<Cluster> cluster(new Cluster());
  const char* tmp = getenv("TEST_TMPDIR");
  std::string pattern = (fs::path(tmp ? tmp : "/tmp") / "cluster-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  cluster->dir_ = pattern;
  absl::Status started = cluster->StartProcesses(options);
  if (!started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat(started.message(), "\n", cluster->LogTails()));
  }
  return cluster;
}

absl::Status Cluster::StartCoordinator(int index, const std::string& listen,
                                       absl::Time deadline) {
  const std::string port_file = (fs::path(dir_) / absl::StrCat("coordinator-", index, ".port")).string();
  std::remove(port_file.c_str());
  std::vector<std::string> argv = {
      RunfilePath("coordinator/ringleader-coordinator"), "--listen=" + listen,
      "--port_file=" + port_file,
      "--heartbeat_interval=" + absl::FormatDuration(options_.heartbeat_interval),
      "--heartbeat_timeout=" + absl::FormatDuration(options_.heartbeat_timeout),
      // No metrics server unless the test asks for one (coordinator_flags come later and win):
      // clusters run side by side and would all want the default port.
      "--http_listen=", TlsFlag()};
  if (options_.allow_fault_injection) argv.push_back("--allow_fault_injection");
  argv.insert(argv.end(), options_.coordinator_flags.begin(), options_.coordinator_flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> coordinator = ChildProcess::Start(
      argv, (fs::path(dir_) / absl::StrCat("coordinator-", coordinator_starts_++, ".log")).string());
  if (!coordinator.ok()) return coordinator.status();
  if (coordinators_.size() <= static_cast<size_t>(index)) coordinators_.resize(index + 1);
  coordinators_[index] = std::move(*coordinator);
  ChildProcess& process = *coordinators_[index];
  std::string address;
  while (true) {
    address = std::string(absl::StripAsciiWhitespace(ReadFile(port_file)));
    if (!address.empty()) break;
    if (process.HasExited()) {
      return absl::InternalError(absl::StrCat("coordinator ", index, " exited: ",
                                              process.Wait().Describe()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("coordinator ", index, " never wrote its port file"));
    }
    absl::SleepFor(kPollPause);
  }
  if (addresses_.size() <= static_cast<size_t>(index)) addresses_.resize(index + 1);
  addresses_[index] = address;
  address_ = absl::StrJoin(addresses_, ",");
  tracker_ = std::make_unique<LeaderTracker>(addresses_);
  return absl::OkStatus();
}

absl::Status Cluster::KillAndRestartCoordinator(absl::Duration down_for) {
  kill(coordinators_.at(0)->pid(), SIGKILL);
  coordinators_.at(0)->Wait();
  // The outage itself: nothing to wait for, the daemons and ranks live through it.
  if (down_for > absl::ZeroDuration()) absl::SleepFor(down_for);
  // The same address, so the daemons find it again (they re-register when their heartbeat is
  // refused by the new coordinator).
  return StartCoordinator(0, addresses_.at(0), absl::Now() + options_.start_timeout);
}

std::string Cluster::tls_dir() const {
  return options_.insecure ? "" : (fs::path(dir_) / "tls").string();
}

std::string Cluster::TlsFlag() const {
  return options_.insecure ? "--insecure" : "--tls_dir=" + tls_dir();
}

void Cluster::AddToken(grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::Status Cluster::StartProcesses(const ClusterOptions& options) {
  options_ = options;
  const absl::Time deadline = absl::Now() + options.start_timeout;
  if (!options.insecure) {
    const std::string command = absl::StrCat(RunfilePath("deploy/certs.sh"), " ", tls_dir(),
                                             " >", (fs::path(dir_) / "certs.log").string(), " 2>&1");
    if (std::system(command.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("deploy/certs.sh failed: ",
                                              ReadFile((fs::path(dir_) / "certs.log").string())));
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor({tls_dir(), "client", options_.insecure});
  if (!credentials.ok()) return credentials.status();
  credentials_ = *std::move(credentials);
  for (int i = 0; i < std::max(1, options.coordinators); ++i) {
    RETURN_IF_ERROR(StartCoordinator(i, "127.0.0.1:0", deadline));
  }

  for (int i = 0; i < options.workers; ++i) {
    const std::string name = WorkerName(i);
    std::vector<std::string> argv = {
        RunfilePath("worker/ringleader-worker"),
        "--coordinator=" + address_,
        "--name=" + name,
        "--work_dir=" + (fs::path(dir_) / name).string(),
        "--rank_binary=" + RunfilePath("worker/ringleader-rank"),
        "--kill_grace=" + absl::FormatDuration(options.kill_grace),
        "--wait_timeout=2s",
        DefaultAllowedRootsFlag(),
        TlsFlag(),
    };
    argv.insert(argv.end(), options.worker_flags.begin(), options.worker_flags.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
        ChildProcess::Start(argv, (fs::path(dir_) / (name + ".log")).string());
    if (!worker.ok()) return worker.status();
    workers_.push_back(std::move(*worker));
    worker_argv_.push_back(std::move(argv));
  }
  return WaitForIdleWorkers(options.workers, deadline - absl::Now());
}

Cluster::~Cluster() {
  for (auto& worker : workers_) {
    // A daemon a test left stopped would only act on SIGTERM once continued.
    if (!worker->HasExited()) kill(-worker->pid(), SIGCONT);
    worker->Terminate(absl::Seconds(3));
  }
  for (auto& worker : workers_) worker->Wait();
  for (auto& coordinator : coordinators_) {
    if (coordinator == nullptr) continue;
    if (!coordinator->HasExited()) kill(coordinator->pid(), SIGCONT);
    coordinator->Terminate(absl::Seconds(3));
    coordinator->Wait();
  }
}

std::vector<ExitInfo> Cluster::StopWorkers() {
  std::vector<ExitInfo> exits;
  for (auto& worker : workers_) worker->Terminate(absl::Seconds(5));
  for (auto& worker : workers_) exits.push_back(worker->Wait());
  return exits;
}

bool Cluster::WorkerRunning(int i) const { return !workers_.at(i)->HasExited(); }

pid_t Cluster::WorkerPid(int i) const { return workers_.at(i)->pid(); }

std::string Cluster::WorkerName(int i) { return absl::StrCat("e2e-w", i); }

int Cluster::WorkerIndex(const std::string& name) const {
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    if (WorkerName(i) == name) return i;
  }
  return -1;
}

std::vector<ProcessRef> Cluster::WorkerChildren(int i) const { return ChildrenOf(WorkerPid(i)); }

std::vector<ProcessRef> ChildrenOf(pid_t parent) {
  std::vector<ProcessRef> children;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const ProcStat stat = ReadProcStat(pid);
    if (stat.exists && stat.parent == parent) children.push_back({pid, stat.start_time});
  }
  return children;
}

absl::Status Cluster::SignalWorker(int i, int signal) {
  if (kill(-WorkerPid(i), signal) != 0) {
    return absl::InternalError(absl::StrCat("kill(-", WorkerPid(i), ", ", signal,
                                            "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status Cluster::RestartWorker(int i) {
  workers_.at(i)->Terminate(absl::Seconds(3));
  workers_.at(i)->Wait();
  const std::string log = (fs::path(dir_) / absl::StrCat(WorkerName(i), ".restarted.log")).string();
  absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
      ChildProcess::Start(worker_argv_.at(i), log);
  if (!worker.ok()) return worker.status();
  workers_[i] = std::move(*worker);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::WorkerStatus>> Cluster::ListWorkers() {
  v1::ListWorkersResponse response;
  grpc::Status status = CallJobs([&](v1::JobService::Stub& jobs, grpc::ClientContext* context) {
    return jobs.ListWorkers(context, v1::ListWorkersRequest(), &response);
  });
  if (!status.ok()) return ToStatus(status, "ListWorkers");
  return std::vector<v1::WorkerStatus>(response.workers().begin(), response.workers().end());
}

absl::StatusOr<std::string> Cluster::Submit(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  grpc::Status status = CallJobs([&](v1::JobService::Stub& jobs, grpc::ClientContext* context) {
    return jobs.SubmitJob(context, request, &response);
  });
  if (!status.ok()) return ToStatus(status, "SubmitJob");
  return response.job_id();
}

absl::StatusOr<v1::JobStatus> Cluster::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::GetJobResponse response;
  grpc::Status status = CallJobs([&](v1::JobService::Stub& jobs, grpc::ClientContext* context) {
    return jobs.GetJob(context, request, &response);
  });
  if (!status.ok()) return ToStatus(status, "GetJob");
  return response.job();
}

absl::StatusOr<v1::GetJobMetricsResponse> Cluster::GetMetrics(const std::string& job_id) {
  v1::GetJobMetricsRequest request;
  request.set_job_id(job_id);
  v1::GetJobMetricsResponse response;
  grpc::Status status = CallJobs([&](v1::JobService::Stub& jobs, grpc::ClientContext* context) {
    return jobs.GetJobMetrics(context, request, &response);
  });
  if (!status.ok()) return ToStatus(status, "GetJobMetrics");
  return response;
}

absl::Status Cluster::WaitForState(const std::string& job_id, v1::JobState state,
                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::JobState seen = v1::JOB_STATE_UNSPECIFIED;
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    AddToken(&context);
    context.set_deadline(DeadlineIn(kRpcTimeout));
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::GetJobResponse response;
    const grpc::Status status = Jobs()->GetJob(&context, request, &response);
    Follow(context, status);
    if (status.ok()) {
      seen = response.job().state();
      if (seen == state) return absl::OkStatus();
      if (IsTerminal(seen)) break;
    }
    absl::SleepFor(kPollPause);
  }
  return absl::DeadlineExceededError(absl::StrCat("job ", job_id, " never reached ",
                                                  v1::JobState_Name(state), " (last seen ",
                                                  v1::JobState_Name(seen), ")"));
}

JobHistory Cluster::WaitForEnd(const std::string& job_id, absl::Duration timeout) {
  JobHistory history;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  uint64_t version = 0;
  while (absl::Now() < deadline) {
    const absl::Duration wait = std::min(absl::Seconds(2), deadline - absl::Now());
    grpc::ClientContext context;
    AddToken(&context);
    context.set_deadline(DeadlineIn(wait + kRpcTimeout));
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_after_version(version);
    request.set_wait_timeout_ms(
        static_cast<uint32_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(wait))));
    v1::WatchJobResponse response;
    if (const grpc::Status status = Jobs()->WatchJob(&context, request, &response); !status.ok()) {
      Follow(context, status);
      absl::SleepFor(kPollPause);
      continue;
    }
    history.final = response.job();
    version = response.job().version();
    for (const v1::RankStatus& rank : response.job().ranks()) {
      if (!rank.has_last_step()) continue;
      std::vector<v1::StepReport>& seen = history.observed_steps[rank.rank()];
      if (seen.empty() || seen.back().step() != rank.last_step().step()) {
        seen.push_back(rank.last_step());
      }
    }
    if (IsTerminal(response.job().state())) {
      history.ended = true;
      break;
    }
  }
  history.elapsed = absl::Now() - start;
  return history;
}

absl::Status Cluster::WaitForIdleWorkers(int n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last;
  while (true) {
    grpc::ClientContext context;
    AddToken(&context);
    context.set_deadline(DeadlineIn(kRpcTimeout));
    v1::ListWorkersResponse response;
    grpc::Status status = Jobs()->ListWorkers(&context, v1::ListWorkersRequest(), &response);
    Follow(context, status);
    if (status.ok()) {
      int idle = 0;
      for (const v1::WorkerStatus& worker : response.workers()) {
        if (worker.state() == v1::WORKER_STATE_IDLE) ++idle;
      }
      if (idle >= n) return absl::OkStatus();
      last = absl::StrCat(idle, " of ", n, " workers idle");
    } else {
      last = status.error_message();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("workers never became idle: ", last));
    }
    absl::SleepFor(kPollPause * 2);
  }
}

v1::JobService::Stub* Cluster::Jobs() {
  const std::string target = tracker_->current();
  std::unique_ptr<v1::JobService::Stub>& stub = stubs_[target];
  if (stub == nullptr) stub = v1::JobService::NewStub(grpc::CreateChannel(target, credentials_));
  return stub.get();
}

bool Cluster::Follow(const grpc::ClientContext& context, const grpc::Status& status) {
  // DEADLINE_EXCEEDED: a coordinator that does not answer (stopped) is left like a dead one.
  if ((status.error_code() != grpc::StatusCode::UNAVAILABLE &&
       status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) ||
      addresses_.size() < 2) {
    return false;
  }
  std::string hint;
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto it = trailers.find(kLeaderMetadataKey); it != trailers.end()) {
    hint = std::string(it->second.data(), it->second.size());
  }
  tracker_->OnRefused(tracker_->current(), hint);
  // Without a hint the coordinator is down or between roles: give it a moment.
  if (hint.empty()) absl::SleepFor(kPollPause * 5);
  return true;
}

template <typename Call>
grpc::Status Cluster::CallJobs(Call call) {
  // A failover takes the lease TTL and a start: calls retry across it.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (true) {
    grpc::ClientContext context;
    AddToken(&context);
    context.set_deadline(DeadlineIn(kRpcTimeout));
    grpc::Status status = call(*Jobs(), &context);
    if (!Follow(context, status) || absl::Now() > deadline) return status;
  }
}

pid_t Cluster::CoordinatorPid(int i) const { return coordinators_.at(i)->pid(); }

absl::Status Cluster::SignalCoordinator(int i, int signal) {
  if (kill(CoordinatorPid(i), signal) != 0) {
    return absl::InternalError(absl::StrCat("kill(", CoordinatorPid(i), ", ", signal,
                                            "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Cluster::LeaderIndex(absl::Duration timeout, int except) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    for (int i = 0; i < static_cast<int>(addresses_.size()); ++i) {
      if (i == except) continue;
      // Asked directly: a standby answers UNAVAILABLE, the leader answers.
      grpc::ClientContext context;
      AddToken(&context);
      context.set_deadline(DeadlineIn(absl::Seconds(1)));
      v1::ListWorkersResponse response;
      auto stub = v1::JobService::NewStub(grpc::CreateChannel(addresses_[i], credentials_));
      if (stub->ListWorkers(&context, v1::ListWorkersRequest(), &response).ok()) return i;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no coordinator led within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(kPollPause * 5);
  }
}

absl::StatusOr<std::string> Cluster::HttpAddress() const {
  const std::string log =
      (fs::path(dir_) / absl::StrCat("coordinator-", coordinator_starts_ - 1, ".log")).string();
  const std::string text = ReadFile(log);
  const std::string kLine = "serving the dashboard on http://";
  const size_t at = text.rfind(kLine);
  if (at == std::string::npos) {
    return absl::NotFoundError(absl::StrCat(log, " names no HTTP address: start the coordinator "
                                            "with --http_listen=127.0.0.1:0"));
  }
  const size_t start = at + kLine.size();
  return text.substr(start, text.find('/', start) - start);
}

CliResult Cluster::RunCli(const std::vector<std::string>& args, absl::Duration timeout) {
  CliResult result;
  std::vector<std::string> argv = {RunfilePath("client/ringleader"), "--coordinator", address_,
                                   TlsFlag()};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = (fs::path(dir_) / absl::StrCat("cli-", cli_runs_++, ".out")).string();
  absl::StatusOr<std::unique_ptr<ChildProcess>> cli = ChildProcess::Start(argv, log);
  if (!cli.ok()) {
    result.output = std::string(cli.status().message());
    return result;
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (!(*cli)->HasExited() && absl::Now() < deadline) absl::SleepFor(kPollPause);
  if (!(*cli)->HasExited()) (*cli)->Terminate(absl::Seconds(1));
  const ExitInfo exit = (*cli)->Wait();
  result.exit_code = exit.signaled ? -exit.signal : exit.exit_code;
  result.output = ReadFile(log);
  return result;
}

std::string Cluster::LogTails(int lines) const {
  std::vector<std::string> logs;
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(dir_, error)) {
    const std::string path = entry.path().string();
    if (entry.is_regular_file() && (entry.path().extension() == ".log")) logs.push_back(path);
  }
  std::sort(logs.begin(), logs.end());
  std::string text;
  for (const std::string& path : logs) {
    absl::StrAppend(&text, "---- ", path, "\n", Tail(path, lines), "\n");
  }
  return text;
}

}  // namespace e2e
}  // namespace ringleader
