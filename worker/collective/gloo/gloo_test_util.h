// Test helpers for collective backends: ranks as threads in one process, a watchdog that turns
// a hang into a failure, and a forked child for scenarios in which gloo may std::terminate.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_TEST_UTIL_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace testing_util {

// Aborts the process (failing the test with a message) if not destroyed within `limit`.
// Use one per test whose threads or sockets could hang.
class Watchdog {
 public:
  Watchdog(absl::Duration limit, std::string what);
  ~Watchdog();

 private:
  absl::Notification done_;
  std::thread thread_;
};

// Runs fn(rank) for every rank on its own thread and joins them all.
void ForEachRankInParallel(int world_size, const std::function<void(int rank)>& fn);

// Rendezvouses `world_size` gloo ranks (threads) over loopback through one in-memory store
// under `key_prefix`; returns the per-rank results in rank order.
std::vector<absl::StatusOr<std::unique_ptr<Collective>>> CreateGlooRanks(
    int world_size, const GlooOptions& opts, const std::string& key_prefix = "test/0/gloo/",
    std::shared_ptr<InMemoryKeyValueStore> store = nullptr);

// What a forked child reported.
struct ChildOutcome {
  bool timed_out = false;       // killed after the limit
  bool exited = false;          // exited by itself (else killed by a signal)
  int exit_code = -1;           // valid if exited
  int signal = 0;               // valid if !exited
  std::string report;           // what the body returned (empty if it never returned)
  std::string Describe() const;  // for assertion messages
};

// Forks; the child runs `body`, sends its returned string to the parent and _exit(0)s without
// running destructors (gloo teardown after a failure may abort). The parent waits at most `limit`
// and kills the child after it. Call only while the process runs no other threads of the test.
ChildOutcome RunInChild(const std::function<std::string()>& body, absl::Duration limit);

}  // namespace testing_util
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_TEST_UTIL_H_
