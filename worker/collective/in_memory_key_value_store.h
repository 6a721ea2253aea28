// An in-process KeyValueStore: the rendezvous store of tests and of single-process runs.
#ifndef RINGLEADER_WORKER_COLLECTIVE_IN_MEMORY_KEY_VALUE_STORE_H_
#define RINGLEADER_WORKER_COLLECTIVE_IN_MEMORY_KEY_VALUE_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

// A map guarded by one mutex; Get waits on a condition until the key appears or the timeout
// passes. Timeouts are real time (the wait is a mutex condition wait, which no injected clock can
// drive); tests use short timeouts only on paths expected to fail.
//
// Owned by the test (or process) that creates it, typically shared by every rank as a
// std::shared_ptr. Thread-safe.
class InMemoryKeyValueStore : public KeyValueStore {
 public:
  InMemoryKeyValueStore() = default;
  InMemoryKeyValueStore(const InMemoryKeyValueStore&) = delete;
  InMemoryKeyValueStore& operator=(const InMemoryKeyValueStore&) = delete;

  // Sets `key` and wakes every waiter. Errors: the injected error, if any.
  absl::Status Set(const std::string& key, const std::string& value) override;

  // Returns the value of `key`, waiting up to `timeout` for it to be set (a negative or zero
  // timeout checks once). Errors: DEADLINE_EXCEEDED naming the key; the injected error, if any
  // (also wakes waiters already blocked).
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

  // Makes every later call (and every blocked Get) fail with `error`; OkStatus() clears it.
  // Lets tests simulate an unreachable coordinator or a stale attempt.
  void InjectError(const absl::Status& error);

  // The keys set so far, sorted.
  std::vector<std::string> Keys() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  absl::Status injected_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_IN_MEMORY_KEY_VALUE_STORE_H_
