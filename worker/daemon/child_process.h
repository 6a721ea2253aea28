// A supervised child process: the worker daemon runs every rank of a job attempt in one, so a
// crash inside a collective library (gloo may std::terminate from its own I/O thread) or an
// injected abort() never takes the daemon down.
//
// The child runs in its own process group (so a termination reaches any grandchildren too), dies
// with SIGKILL if the thread that started it exits (PR_SET_PDEATHSIG: a killed daemon leaves no
// orphaned ranks behind), and has stdout and stderr appended to a log file. ChildOptions can
// instead keep the parent's group and stdout, send stderr to a pipe, and set the environment and
// the working directory (the rank launcher runs a user's command this way).
//
//   Start ──> RUNNING ──exits / killed──────────────────────────────> EXITED (Wait returns)
//                │
//                └─Terminate(grace): SIGTERM to the group ──exits──> EXITED
//                                        └─still running after grace: SIGKILL ──> EXITED
//
// Thread-safety: Wait() from one thread; Terminate() and accessors from any thread. The pid is
// never signalled after it was reaped (kills and the reap are serialised on one mutex), so a
// recycled pid is never hit. The destructor kills a child that is still running and reaps it.
#ifndef RINGLEADER_WORKER_DAEMON_CHILD_PROCESS_H_
#define RINGLEADER_WORKER_DAEMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/job_status.pb.h"

namespace ringleader {

// How a child process ended.
struct ExitInfo {
  bool signaled = false;  // killed by a signal (then `signal` is set), else exited
  int signal = 0;
  int exit_code = 0;

  bool success() const { return !signaled && exit_code == 0; }
  // "exited with code 3", "killed by signal 6 (SIGABRT)".
  std::string Describe() const;
};

// "SIGABRT" for 6, "SIGKILL" for 9, ...; "signal N" for unknown numbers.
std::string SignalName(int signal);

// The failure (common/rank_failure.h) a rank process's end is when nobody reported it: SIGNAL
// with the signal's number when one killed it; EXITED (it exited without saying why) otherwise.
// `stopped`: the worker was told to stop it (the attempt ended elsewhere): STOPPED, with the
// signal's number when one ended it.
v1::RankFailure ExitFailure(const ExitInfo& exit, bool stopped = false);

// How a child is started. Plain struct; defaults commented.
struct ChildOptions {
  // stdout and stderr are appended to this file (created, truncated first; O_APPEND, so a
  // reader may truncate it under the child). "" = the parent's stdout and stderr.
  std::string log_path;
  // When >= 0, the child's stderr goes to this descriptor (e.g. a pipe's write end) instead.
  int stderr_fd = -1;
  // The child's whole environment, "KEY=VALUE" each; unset = the parent's.
  std::optional<std::vector<std::string>> env;
  // Working directory of the child; "" = the parent's. Must be an existing directory.
  std::string workdir;
  // A process group of its own (Terminate signals the group). false: the parent's group,
  // so a signal to the parent's group reaches the child too; Terminate signals the child only.
  bool own_process_group = true;
};

// Process `pid`'s state as /proc/PID/stat gives it, in words: "running", "sleeping", "disk
// sleep", "stopped", "tracing stop", "zombie", "dead", "idle"; "" when it cannot be read (no
// such process). Evidence for the coordinator's failure reasons (a "stopped" rank got SIGSTOP).
std::string ProcessState(pid_t pid);

class ChildProcess {
 public:
  // Forks and execs argv[0] (a path) with `argv`; stdout and stderr go to `log_path` (created or
  // truncated). Errors: INVALID_ARGUMENT (empty argv), NOT_FOUND (argv[0] is not an executable
  // file), INTERNAL (fork failed). A child whose exec fails exits with code 127.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  // The same with every option. Further errors: NOT_FOUND (options.workdir is not a
  // directory). A child that cannot enter the working directory exits with code 126.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const ChildOptions& options);
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Blocks until the child has exited, reaps it and returns how it ended. Repeated calls return
  // the same result.
  ExitInfo Wait();

  // True once the child has exited (reaped or not). Never blocks, never reaps.
  bool HasExited() const;

  // Sends SIGTERM to the child's process group now and SIGKILL after `grace` if it is still
  // running. Non-blocking; idempotent (the first call's grace counts). No-op once exited.
  void Terminate(absl::Duration grace);

  // True once Terminate() was called.
  bool terminate_requested() const;

 private:
  ChildProcess(pid_t pid, bool own_group) : pid_(pid), own_group_(own_group) {}
  void KillGroupLocked(int signal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const pid_t pid_;
  const bool own_group_;  // Terminate signals the whole group (else the child only)
  absl::Notification exited_;
  mutable absl::Mutex mu_;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  ExitInfo exit_info_ ABSL_GUARDED_BY(mu_);
  bool terminate_requested_ ABSL_GUARDED_BY(mu_) = false;
  // Sends the SIGKILL after the grace period unless the child exits first.
  std::thread killer_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_CHILD_PROCESS_H_
