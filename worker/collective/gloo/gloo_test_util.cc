#include "worker/collective/gloo/gloo_test_util.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringleader {
namespace testing_util {

Watchdog::Watchdog(absl::Duration limit, std::string what)
    : thread_([this, limit, what = std::move(what)] {
        if (!done_.WaitForNotificationWithTimeout(limit)) {
          std::fprintf(stderr, "WATCHDOG: %s did not finish within %s; aborting\n", what.c_str(),
                       absl::FormatDuration(limit).c_str());
          std::fflush(stderr);
          std::abort();
        }
      }) {}

Watchdog::~Watchdog() {
  done_.Notify();
  thread_.join();
}

void ForEachRankInParallel(int world_size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int r = 0; r < world_size; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (std::thread& t : threads) t.join();
}

std::vector<absl::StatusOr<std::unique_ptr<Collective>>> CreateGlooRanks(
    int world_size, const GlooOptions& opts, const std::string& key_prefix,
    std::shared_ptr<InMemoryKeyValueStore> store) {
  if (store == nullptr) store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::StatusOr<std::unique_ptr<Collective>>> ranks;
  for (int r = 0; r < world_size; ++r) ranks.emplace_back(absl::UnknownError("not created"));
  ForEachRankInParallel(world_size, [&](int r) {
    ranks[r] = CreateGlooCollective(store, key_prefix, r, world_size, opts);
  });
  return ranks;
}

std::string ChildOutcome::Describe() const {
  if (timed_out) return absl::StrCat("child timed out; report so far: \"", report, "\"");
  if (!exited) return absl::StrCat("child killed by signal ", signal, "; report: \"", report, "\"");
  return absl::StrCat("child exited with ", exit_code, "; report: \"", report, "\"");
}

ChildOutcome RunInChild(const std::function<std::string()>& body, absl::Duration limit) {
  ChildOutcome outcome;
  int fds[2];
  if (pipe(fds) != 0) {
    outcome.report = "pipe() failed";
    return outcome;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    outcome.report = "fork() failed";
    return outcome;
  }
  if (pid == 0) {
    close(fds[0]);
    const std::string report = body();
    size_t written = 0;
    while (written < report.size()) {
      const ssize_t n = write(fds[1], report.data() + written, report.size() - written);
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  // Read until EOF (the child exited or closed the pipe) or the deadline.
  const absl::Time deadline = absl::Now() + limit;
  char buf[4096];
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      outcome.timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-check the deadline
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    outcome.report.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (outcome.timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (WIFEXITED(wstatus)) {
    outcome.exited = true;
    outcome.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    outcome.signal = WTERMSIG(wstatus);
  }
  return outcome;
}

}  // namespace testing_util
}  // namespace ringleader
