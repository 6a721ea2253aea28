// fork + execv with the child-side set-up done between them. Only async-signal-safe calls run in
// the child before exec: the daemon is multi-threaded (gRPC), so anything taking a lock there
// could deadlock on a lock some other thread held at fork time.
#include "worker/daemon/child_process.h"

#include <fstream>

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringleader {

std::string SignalName(int signal) {
  // sigabbrev_np is glibc-only (2.32+); it gives "ABRT" for 6.
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string ProcessState(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return "";
  // "PID (COMM) S ...": the state follows the last ')' (COMM may hold anything).
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "";
  switch (line[close + 2]) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    default: return std::string(1, line[close + 2]);
  }
}

v1::RankFailure ExitFailure(const ExitInfo& exit, bool stopped) {
  v1::RankFailure failure;
  failure.set_kind(stopped         ? v1::RankFailure::STOPPED
                   : exit.signaled ? v1::RankFailure::SIGNAL
                                   : v1::RankFailure::EXITED);
  if (exit.signaled) failure.set_signal(exit.signal);
  return failure;
}

std::string ExitInfo::Describe() const {
  if (signaled) return absl::StrCat("killed by signal ", signal, " (", SignalName(signal), ")");
  return absl::StrCat("exited with code ", exit_code);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  ChildOptions options;
  options.log_path = log_path;
  return Start(argv, options);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const ChildOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("ChildProcess::Start: empty argv");
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("'", argv[0], "' is not an executable file: ", strerror(errno)));
  }
  if (!options.workdir.empty()) {
    struct stat info;
    if (stat(options.workdir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      return absl::NotFoundError(
          absl::StrCat("working directory '", options.workdir, "' is not a directory"));
    }
  }
  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  if (options.env.has_value()) {
    env.reserve(options.env->size() + 1);
    for (const std::string& entry : *options.env) env.push_back(const_cast<char*>(entry.c_str()));
    env.push_back(nullptr);
  }
  const char* log = options.log_path.empty() ? nullptr : options.log_path.c_str();
  const char* workdir = options.workdir.empty() ? nullptr : options.workdir.c_str();
  const int stderr_fd = options.stderr_fd;
  const bool own_group = options.own_process_group;
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
    // Dies with the forking thread of the daemon; the getppid check closes the race where the
    // daemon died before prctl ran.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    // The daemon may block or ignore signals it handles itself; exec keeps masks and SIG_IGN.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (log != nullptr) {
      const int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      if (out >= 0) {
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
      }
    }
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    const int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    // The daemon's sockets (gRPC) must not leak into the rank.
    close_range(3, ~0U, 0);
    if (workdir != nullptr && chdir(workdir) != 0) _exit(126);
    if (env.empty()) {
      execv(args[0], args.data());
    } else {
      execve(args[0], args.data(), env.data());
    }
    _exit(127);
  }
  // Also set in the parent, so a Terminate() right after Start finds the group (whichever of
  // parent and child runs first).
  if (own_group) setpgid(pid, pid);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, own_group));
}

ChildProcess::~ChildProcess() {
  {
    absl::MutexLock lock(&mu_);
    if (!reaped_) KillGroupLocked(SIGKILL);
  }
  Wait();
  if (killer_.joinable()) killer_.join();
}

void ChildProcess::KillGroupLocked(int signal) {
  if (!own_group_ || kill(-pid_, signal) != 0) kill(pid_, signal);
}

ExitInfo ChildProcess::Wait() {
  {
    absl::MutexLock lock(&mu_);
    if (reaped_) return exit_info_;
  }
  // Wait without reaping first: the pid stays ours (a zombie) while Terminate may still signal it.
  siginfo_t info;
  while (waitid(P_PID, pid_, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  ExitInfo result;
  {
    absl::MutexLock lock(&mu_);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      result.signaled = true;
      result.signal = WTERMSIG(status);
    } else {
      result.exit_code = WEXITSTATUS(status);
    }
    reaped_ = true;
    exit_info_ = result;
  }
  exited_.Notify();
  return result;
}

bool ChildProcess::HasExited() const {
  absl::MutexLock lock(&mu_);
  if (reaped_) return true;
  siginfo_t info;
  info.si_pid = 0;
  // WNOWAIT: the zombie stays for Wait() to reap.
  return waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
}

void ChildProcess::Terminate(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (reaped_ || terminate_requested_) return;
  terminate_requested_ = true;
  KillGroupLocked(SIGTERM);
  killer_ = std::thread([this, grace] {
    if (exited_.WaitForNotificationWithTimeout(grace)) return;
    absl::MutexLock kill_lock(&mu_);
    if (!reaped_) KillGroupLocked(SIGKILL);
  });
}

bool ChildProcess::terminate_requested() const {
  absl::MutexLock lock(&mu_);
  return terminate_requested_;
}

}  // namespace ringleader
