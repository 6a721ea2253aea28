// The worker daemon: one per device (CPU or GPU) of a host. It registers with the coordinator,
// keeps its lease alive, waits for assignments and runs each one as a supervised child process
// (the rank binary, `ringleader-rank`), reporting on the rank's behalf when that process dies
// without reporting itself.
//
//   UNREGISTERED ──RegisterWorker ok──> IDLE ──WaitAssignment → assignment──> RUNNING (child)
//        ^   └─error: retry after retry_interval      ^                  │
//        │                                                      └──child exited───┘
//        └── Heartbeat / WaitAssignment answer NOT_FOUND (lease lost): register again with the
//            same incarnation, naming the rank still running (RegisterWorkerRequest.running).
//            The coordinator keeps it (running_kept: a restarted coordinator whose job goes on)
//            or refuses it: the child of the lost lease is then terminated and NOT reported:
//            that coordinator failed its attempt already. The coordinator gives the same id
//            back, so registrations are counted (the lease epoch): a NOT_FOUND to a call made
//            under an epoch already renewed is ignored, and only the child the registration
//            named is stopped (one started meanwhile came from the renewed registration: the
//            coordinator checks the incarnation on every WaitAssignment).
//
// Coordinator outage: while heartbeats fail with anything but NOT_FOUND (unreachable), the
// child keeps running (its reports wait in its own queue) until `coordinator_grace` (the
// coordinator's, from the registration) has passed since the coordinator last answered; then
// the child is terminated and not reported (the job restarts from its last checkpoint once the
// coordinator is back).
//   any state ──Stop()──> STOPPED (child terminated, Run returns OK)
//
// While RUNNING, a heartbeat answer listing the running attempt in `abort` terminates the child:
// SIGTERM, then SIGKILL after `kill_grace`. When the child exits abnormally (a signal, or an exit
// without the report marker it writes after its own FinishRank) the daemon calls
// FinishRank(ok=false, "rank process killed by signal 6 (SIGABRT); last output: ..."); the
// coordinator keeps the first report of a rank, so a rank that reported itself wins. The daemon
// never dies because a child did.
//
// Confinement: before starting a rank, the paths its job spec names (checkpoint_dir, data.path,
// model.init_from, a command job's workdir) must lie in `allowed_roots`; otherwise no child is
// started and the daemon reports FinishRank(ok=false, job_error=true, "checkpoint_dir: /etc is
// outside the worker's allowed roots (...)"), which fails the job without a restart.
//
// Files: every attempt gets <work_dir>/<job>-g<generation>-r<rank>/ holding assignment.pb (the
// binary Assignment proto the child reads), rank.log (the child's stdout+stderr; a leftover of
// an earlier run in the same directory is removed first) and finish_reported (written by the
// child once its FinishRank went through).
//
// Output: while the child runs, a LogShipper (log_shipper.h) sends rank.log's new bytes to the
// coordinator every `log_ship_interval` (AppendLogs; `ringleader logs` reads them) and rotates
// it to rank.log.1 past `max_log_bytes`. After the child exited, its last output is sent before
// the daemon reports the rank's end, so the coordinator holds the lines that explain it.
//
// Rank command line: <rank_binary> --assignment=<file> --coordinator=<address>
//   --worker_id=<id> --report_marker=<file> [--gpu=<index>] [--victim_report_delay=<d>]
//   --coordinator_grace=<d> <rank_extra_args...>
//
// Thread-safety: Run() once, from one thread; Stop() and the accessors from any thread (Stop is
// safe to call from a signal-watching thread). The client must outlive the daemon; destroy the
// daemon only after Run() returned (or if it was never called).
//
// Time: the injected clock (monotonic) measures only how long the coordinator has been
// unreachable; the waits (heartbeat interval, registration retry, kill grace) are timed waits
// on notifications, so Stop() cuts every one short.
//
// Hand-off: every WaitAssignment names the last attempt this daemon started (last_started), so
// an assignment whose answer was lost on the way is handed out again.
#ifndef RINGLEADER_WORKER_DAEMON_DAEMON_H_
#define RINGLEADER_WORKER_DAEMON_DAEMON_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/daemon/allowed_roots.h"
#include "worker/daemon/child_process.h"
#include "worker/daemon/log_shipper.h"

namespace ringleader {

struct WorkerDaemonOptions {
  // Registration name, stable across restarts (e.g. "node1-gpu0"). Required.
  std::string name;
  // Host name reported to the coordinator. Required.
  std::string host;
  // Where it sits, "RACK/HOST" or "HOST" (common/topology.h), by which the coordinator packs a
  // job's ranks; "" = `host`.
  std::string topology;
  // Devices this daemon drives (one CPU, or one GPU). At least one.
  std::vector<v1::Device> devices;
  // GPU index handed to the rank process as --gpu; -1 = CPU worker (no flag).
  int gpu = -1;
  // Tells this daemon start from an earlier one; 0 = pick a random one.
  uint64_t incarnation = 0;
  // Coordinator address ("host:port", or a comma-separated list of a leader and its standbys)
  // handed to the rank process as is. Required.
  std::string coordinator_address;
  // Per-attempt directories are created below it (created if missing). Required.
  std::string work_dir;
  // The ranks' snapshots in memory go to <snapshot_dir>/<job> (worker/rank/snapshots.h): tmpfs,
  // so they outlive a rank process, not the host. Emptied when Run() starts and when it
  // returns; starting a rank of a new job removes the other jobs' there. "" = none.
  std::string snapshot_dir;
  // Path of the rank binary. Required (main() defaults it to ringleader-rank next to itself).
  std::string rank_binary;
  // Appended to every rank command line (test hooks, extra logging flags).
  std::vector<std::string> rank_extra_args;
  // The directories a job's paths must lie in (absolute; see job_paths.h for which paths and
  // allowed_roots.h for how they are resolved). An assignment naming a path outside is not
  // started: the daemon reports it with FinishRank(job_error) naming the field, the path and
  // these roots. Empty = no confinement (logged; main() always sets some, see daemon_main.cc).
  std::vector<std::string> allowed_roots;
  // Long-poll length of WaitAssignment.
  absl::Duration wait_assignment_timeout = absl::Seconds(10);
  // SIGTERM → SIGKILL grace when a child must stop.
  absl::Duration kill_grace = absl::Seconds(5);
  // Wait after a failed RegisterWorker or an unexpected WaitAssignment error.
  absl::Duration retry_interval = absl::Seconds(1);
  // Heartbeat interval when the coordinator's answer leaves it 0.
  absl::Duration default_heartbeat_interval = absl::Seconds(2);
  // How long a rank keeps running while the coordinator is unreachable, until a registration
  // says otherwise (RegisterWorkerResponse.coordinator_grace_ms).
  absl::Duration default_coordinator_grace = absl::Seconds(60);
  // How often a running rank's new output is sent to the coordinator.
  absl::Duration log_ship_interval = absl::Milliseconds(250);
  // rank.log is rotated (copied to rank.log.1, then truncated) once it holds more than this;
  // 0 = never.
  uint64_t max_log_bytes = uint64_t{64} << 20;  // 64 MiB
  // Not owned; nullptr = Clock::Real(). Measures how long the coordinator has been unreachable.
  Clock* clock = nullptr;
  // Called (never under the daemon's lock) with true after each successful registration, and
  // with false when the coordinator says the lease is lost and when Run() returns: the admin
  // port's health. Empty = nothing.
  std::function<void(bool registered)> on_lease_change;
};

// Which attempt a worker runs.
struct AttemptKey {
  std::string job_id;
  uint64_t generation = 0;
  uint32_t rank = 0;
};

class WorkerDaemon {
 public:
  // `client` is not owned.
  WorkerDaemon(CoordinatorClient* client, WorkerDaemonOptions options);
  ~WorkerDaemon();

  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Runs until Stop(). Returns OK after Stop(); INVALID_ARGUMENT (naming the option) when the
  // options are unusable (e.g. a relative allowed root), FAILED_PRECONDITION when the work
  // directory cannot be created.
  absl::Status Run();

  // Asks Run() to return: terminates a running child (kill_grace applies), cancels pending
  // RPCs. Idempotent; non-blocking.
  void Stop();

  // The id of the current registration ("" before the first one succeeded).
  std::string worker_id() const;
  uint64_t incarnation() const { return incarnation_; }
  // Attempts whose child process was started so far.
  int attempts_started() const;

 private:
  // The current registration: its id and how many registrations succeeded so far (0 = none).
  struct Lease {
    std::string worker_id;
    uint64_t epoch = 0;
  };
  Lease lease() const;
  // Registers (or registers again) when the current lease epoch is still `stale_epoch` (the one
  // a call answered NOT_FOUND was made under; 0 = first registration); no-op if another thread
  // renewed the lease since. Returns false when registration failed.
  bool Register(uint64_t stale_epoch);
  void HeartbeatLoop();
  // Runs `assignment` until its child exits (or refuses it: see "Confinement").
  void RunAttempt(const v1::Assignment& assignment);
  // Terminates the running child if it belongs to `attempt` (any attempt if null).
  void TerminateChild(const v1::JobAttempt* attempt, const std::string& why);
  // The running rank process's /proc state (ProcessState), "" when none runs.
  std::string RankProcessState() const;
  // The rank's --snapshot_dir for `assignment` ("" = none), other jobs' removed.
  std::string SnapshotDirFor(const v1::Assignment& assignment) const;
  // Terminates the running child if it is child number `serial` (0 = whichever runs), and
  // marks it abandoned (RunAttempt then reports nothing for it); `why` goes to the log.
  void AbandonChild(uint64_t serial, const std::string& why);
  // Records a heartbeat's outcome; true when it failed (`reachable` false) and the
  // coordinator has not answered for longer than its grace (since the last registration or
  // heartbeat that went through).
  bool OutageExceedsGrace(bool reachable);
  absl::Duration heartbeat_interval() const;

  CoordinatorClient* const client_;
  const WorkerDaemonOptions options_;
  // From options_.allowed_roots, set by Run() before the first assignment; used by Run's thread.
  AllowedRoots allowed_roots_;
  const uint64_t incarnation_;
  Clock* const clock_;
  absl::Notification stop_;

  // Serialises registrations (held across the RegisterWorker RPC; never taken under mu_).
  absl::Mutex register_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  uint64_t lease_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // successful registrations
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  // The coordinator's heartbeat timeout (zero until registered): sets how long a rank whose
  // peer vanished waits for the peer's loss to be declared before reporting (see RankArgv).
  absl::Duration heartbeat_timeout_ ABSL_GUARDED_BY(mu_);
  absl::Duration coordinator_grace_ ABSL_GUARDED_BY(mu_);
  // When the coordinator last answered a registration or heartbeat.
  absl::Time last_reached_ ABSL_GUARDED_BY(mu_);
  // The last attempt a child was started for (acknowledged in every WaitAssignment).
  std::optional<AttemptKey> last_started_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The running child and its attempt; null when IDLE.
  ChildProcess* child_ ABSL_GUARDED_BY(mu_) = nullptr;
  AttemptKey running_ ABSL_GUARDED_BY(mu_);
  // Children started so far (the running one's number), and whether the running one was
  // abandoned (terminated for a lost lease or an outage, and not reported).
  uint64_t child_serial_ ABSL_GUARDED_BY(mu_) = 0;
  bool running_abandoned_ ABSL_GUARDED_BY(mu_) = false;
  int attempts_started_ ABSL_GUARDED_BY(mu_) = 0;
};

// The attempt directory name for `assignment`: "<job>-g<generation>-r<rank>", with characters
// outside [A-Za-z0-9._-] of the job id replaced by '_'.
std::string AttemptDirName(const v1::Assignment& assignment);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_DAEMON_H_
