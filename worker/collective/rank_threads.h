// Test helper: runs one function per rank on its own thread and joins them, failing hard (the
// process aborts with a message) if they have not all returned within a time limit, so a hang
// becomes a test failure instead of a stuck test run.
#ifndef RINGLEADER_WORKER_COLLECTIVE_RANK_THREADS_H_
#define RINGLEADER_WORKER_COLLECTIVE_RANK_THREADS_H_

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ringleader {

// Calls fn(r) for r in `ranks` concurrently; returns when all have returned. Aborts the process
// if that takes longer than `limit`.
inline void RunRanks(const std::vector<int>& ranks, const std::function<void(int)>& fn,
                     absl::Duration limit = absl::Seconds(30)) {
  absl::Notification all_done;
  std::thread watchdog([&] {
    if (!all_done.WaitForNotificationWithTimeout(limit)) {
      std::fprintf(stderr, "RunRanks: ranks still running after %s: hang\n",
                   absl::FormatDuration(limit).c_str());
      std::abort();
    }
  });
  std::vector<std::thread> threads;
  for (int r : ranks) threads.emplace_back([&fn, r] { fn(r); });
  for (std::thread& t : threads) t.join();
  all_done.Notify();
  watchdog.join();
}

inline void RunRanks(int world_size, const std::function<void(int)>& fn,
                     absl::Duration limit = absl::Seconds(30)) {
  std::vector<int> ranks;
  for (int r = 0; r < world_size; ++r) ranks.push_back(r);
  RunRanks(ranks, fn, limit);
}

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_RANK_THREADS_H_
