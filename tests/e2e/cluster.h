// A whole ringleader cluster on this machine for end-to-end tests: the real coordinator binary
// (listening on a free port), N real worker daemons (each running real rank processes), and the
// CLI — every one a supervised child process in its own process group, stopped (SIGCONT in case a
// test stopped it, SIGTERM, then SIGKILL) when the cluster is destroyed, also when a test fails
// half-way. Rank processes die with their daemon (see worker/child_process.h).
//
// Binaries come from the test's runfiles (data dependencies). Every wait polls a condition
// against a deadline; nothing waits "a bit".
//
// Thread-safety: one test thread uses a cluster.
#ifndef RINGLEADER_TESTS_E2E_CLUSTER_H_
#define RINGLEADER_TESTS_E2E_CLUSTER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "common/coordinator_addresses.h"
#include "proto/ringleader.grpc.pb.h"
#include "worker/daemon/child_process.h"

namespace ringleader {
namespace e2e {

struct ClusterOptions {
  int workers = 2;
  // Extra flags of every worker daemon (e.g. --rank_args=...).
  std::vector<std::string> worker_flags;
  // Coordinator heartbeat interval: how fast abort orders reach the daemons.
  absl::Duration heartbeat_interval = absl::Milliseconds(300);
  // Coordinator heartbeat timeout: a daemon silent for longer is declared LOST.
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // The daemons' SIGTERM -> SIGKILL grace for rank processes.
  absl::Duration kill_grace = absl::Seconds(2);
  // How long Start waits for the coordinator's port and every worker's registration.
  absl::Duration start_timeout = absl::Seconds(30);
  // Extra flags of the coordinator (e.g. --state_dir=...).
  std::vector<std::string> coordinator_flags;
  // Coordinators started, each on a port of its own with the same flags. More than one needs
  // --store=etcd among coordinator_flags: one leads, the others stand by. The workers, the CLI
  // and the cluster's own calls get the list (address()) and follow the leader.
  int coordinators = 1;
  // Whether the coordinator is started with --allow_fault_injection (accepts model.faults).
  bool allow_fault_injection = true;
  // Plaintext gRPC (--insecure everywhere) instead of the default mutual TLS with certificates
  // deploy/certs.sh makes in the cluster's directory (tls_dir()).
  bool insecure = false;
  // The bearer token the cluster's own JobService calls carry (a coordinator started with
  // --tokens_file in coordinator_flags needs one); "" = none. RunCli does not add it.
  std::string token;
};

// The --allowed_roots every worker daemon of a Cluster gets before `worker_flags` (a later
// --allowed_roots there replaces it): the test's temporary directory (TEST_TMPDIR, where the
// cluster's directory, checkpoints and command workdirs lie) and the Fashion-MNIST directory.
std::string DefaultAllowedRootsFlag();

// What WaitForEnd saw of a job.
struct JobHistory {
  v1::JobStatus final;  // the terminal status (or the last one seen at the deadline)
  bool ended = false;   // reached a terminal state before the deadline
  // Every distinct last_step observed per rank, in order (a sample: steps between two
  // observations are not seen).
  std::map<uint32_t, std::vector<v1::StepReport>> observed_steps;
  absl::Duration elapsed;  // from WaitForEnd's start to the end
};

// A process as /proc shows it: the start time tells a recycled pid from the original.
struct ProcessRef {
  pid_t pid = 0;
  unsigned long long start_time = 0;  // clock ticks after boot (/proc/PID/stat field 22)
};

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class Cluster {
 public:
  // Starts coordinator and workers; waits until every worker is registered and IDLE.
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const ClusterOptions& options);
  ~Cluster();  // stops every process

  // The coordinator's "host:port"; with several, the list "a,b,c".
  const std::string& address() const { return address_; }
  // Coordinator i's own "host:port", its process, a signal to it (SIGKILL, SIGSTOP, SIGCONT).
  const std::string& coordinator_address(int i) const { return addresses_.at(i); }
  pid_t CoordinatorPid(int i) const;
  absl::Status SignalCoordinator(int i, int signal);
  // The coordinator that leads (answers the JobService itself), waiting up to `timeout` for
  // one, skipping `except` (-1: none). Errors: DEADLINE_EXCEEDED.
  absl::StatusOr<int> LeaderIndex(absl::Duration timeout, int except = -1);

  // SIGKILLs the coordinator and starts it again on the same address with the same flags,
  // `down_for` later.
  absl::Status KillAndRestartCoordinator(absl::Duration down_for = absl::ZeroDuration());
  const std::string& dir() const { return dir_; }
  // The cluster's certificates (ca.pem, coordinator/worker/client .pem and .key); "" when
  // insecure.
  std::string tls_dir() const;
  // "--tls_dir=DIR" or "--insecure", as every process of the cluster gets it.
  std::string TlsFlag() const;

  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id);
  // The current attempt's per-step, per-rank figures.
  absl::StatusOr<v1::GetJobMetricsResponse> GetMetrics(const std::string& job_id);
  // Follows the job with WatchJob until it ends or `timeout` passes.
  JobHistory WaitForEnd(const std::string& job_id, absl::Duration timeout);
  // Polls until the job is in `state`. Errors: DEADLINE_EXCEEDED (naming the last state seen;
  // also at once when the job ended in another state).
  absl::Status WaitForState(const std::string& job_id, v1::JobState state,
                            absl::Duration timeout);
  // Waits until `n` workers are registered and IDLE.
  absl::Status WaitForIdleWorkers(int n, absl::Duration timeout);
  // Whether worker daemon i's process still runs.
  bool WorkerRunning(int i) const;
  // Daemon i's process (the leader of its own process group).
  pid_t WorkerPid(int i) const;
  // Worker i's registration name ("e2e-w<i>").
  static std::string WorkerName(int i);
  // The index of the worker registered as `name`, or -1.
  int WorkerIndex(const std::string& name) const;
  // The child processes of daemon i (its rank processes), zombies included: a child the daemon
  // has not reaped yet is still listed.
  std::vector<ProcessRef> WorkerChildren(int i) const;
  // Sends `signal` to daemon i's process group (the daemon only: each rank process runs in a
  // group of its own). Errors: INTERNAL with errno's text.
  absl::Status SignalWorker(int i, int signal);
  // Starts daemon i again with its original command line (same name, work dir and flags, a new
  // incarnation). A daemon that still runs is stopped first.
  absl::Status RestartWorker(int i);
  // Every registered worker, as the coordinator lists them.
  absl::StatusOr<std::vector<v1::WorkerStatus>> ListWorkers();
  // "host:port" of the running coordinator's HTTP server (/metrics, the dashboard), as its log
  // names it: start the cluster with coordinator_flags {"--http_listen=127.0.0.1:0"}.
  // Errors: NOT_FOUND (the log names no HTTP address: the server is off).
  absl::StatusOr<std::string> HttpAddress() const;

  // Runs the `ringleader` CLI against this cluster (--coordinator is added) and waits for it.
  CliResult RunCli(const std::vector<std::string>& args, absl::Duration timeout);

  // SIGTERMs the workers and returns how each daemon exited (0 = clean shutdown).
  std::vector<ExitInfo> StopWorkers();

  // The last lines of every process's log (coordinator, daemons, rank processes): for failure
  // messages.
  std::string LogTails(int lines = 15) const;

 private:
  Cluster() = default;
  absl::Status StartProcesses(const ClusterOptions& options);
  // Adds options_.token to a call of the cluster's own client.
  void AddToken(grpc::ClientContext* context) const;

  std::string dir_;
  // Starts coordinator `index` (0 .. coordinators-1) on `listen`.
  absl::Status StartCoordinator(int index, const std::string& listen, absl::Time deadline);
  // The JobService of the coordinator the cluster's calls go to now.
  v1::JobService::Stub* Jobs();
  // After a JobService call ended with `status`: with several coordinators, an UNAVAILABLE
  // moves the calls to the leader a standby named in `context`'s trailing metadata, or to the
  // next coordinator; whether to send the call again.
  bool Follow(const grpc::ClientContext& context, const grpc::Status& status);
  // A unary JobService call, sent again (Follow) until it is answered or a failover's time
  // passed.
  template <typename Call>
  grpc::Status CallJobs(Call call);

  ClusterOptions options_;
  int coordinator_starts_ = 0;
  std::string address_;
  std::vector<std::string> addresses_;  // by coordinator
  std::vector<std::unique_ptr<ChildProcess>> coordinators_;
  std::unique_ptr<LeaderTracker> tracker_;
  std::map<std::string, std::unique_ptr<v1::JobService::Stub>> stubs_;  // by address
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<std::vector<std::string>> worker_argv_;  // for RestartWorker
  int cli_runs_ = 0;
};

// Path of a binary in the test's runfiles, e.g. "worker/ringleader-worker".
std::string RunfilePath(const std::string& relative);

bool IsTerminal(v1::JobState state);

// The child processes of `parent`, zombies included.
std::vector<ProcessRef> ChildrenOf(pid_t parent);

// Whether `process` (the same one, not a recycled pid) exists and is not a zombie.
bool ProcessRunning(const ProcessRef& process);

// Polls `condition` until it holds (OK) or `timeout` passes (DEADLINE_EXCEEDED naming `what`).
absl::Status WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
                       const std::string& what);

// The reason of the job's last state transition.
std::string LastReason(const v1::JobStatus& job);

// A small synthetic job that trains in about a second with two ranks (16 steps per epoch),
// without restarts (max_restarts 0: a failure ends it).
v1::JobSpec SmallSyntheticSpec(const std::string& name);
// SmallSyntheticSpec for a job that trains far longer than any test waits (tests cancel it or
// end it with a fault).
v1::JobSpec UntilCancelledSpec(const std::string& name);

}  // namespace e2e
}  // namespace ringleader

#endif  // RINGLEADER_TESTS_E2E_CLUSTER_H_
