// The per-attempt key-value store behind KvSet/KvGet: gloo's rendezvous store and the NCCL
// unique-id relay. Keys live in the namespace of one attempt (job, generation), so a restarted
// attempt never reads what a stale one wrote.
#ifndef RINGLEADER_COORDINATOR_KV_STORE_H_
#define RINGLEADER_COORDINATOR_KV_STORE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/attempt_id.h"
#include "coordinator/deferred_callbacks.h"

namespace ringleader {

using KvGetCallback = std::function<void(absl::StatusOr<std::string>)>;

// Not thread-safe: owned by the Coordinator and used under its lock. Completions are never run
// directly: they are added to the caller's DeferredCallbacks, to run after the lock is released.
// Checking that the attempt is current and live is the caller's job.
class AttemptKvStore {
 public:
  // Sets (overwrites) `key` and completes every Get waiting for it with `value`.
  void Set(const AttemptId& attempt, const std::string& key, std::string value,
           DeferredCallbacks* deferred);

  // Completes `done` with the value if `key` exists. Otherwise, when `deadline` <= `now`,
  // completes it with DEADLINE_EXCEEDED naming the key; else parks it until Set or
  // ExpireWaiters or EndAttempt.
  void Get(const AttemptId& attempt, const std::string& key, absl::Time deadline, absl::Time now,
           KvGetCallback done, DeferredCallbacks* deferred);

  // Completes every parked Get whose deadline is <= `now` with DEADLINE_EXCEEDED.
  void ExpireWaiters(absl::Time now, DeferredCallbacks* deferred);

  // Drops the attempt's keys and completes its parked Gets with `why` (not OK).
  void EndAttempt(const AttemptId& attempt, const absl::Status& why, DeferredCallbacks* deferred);

  // Completes every parked Get of every attempt with `why` (shutdown).
  void FailAllWaiters(const absl::Status& why, DeferredCallbacks* deferred);

  // Number of parked Gets (tests).
  int waiter_count() const;

 private:
  struct Waiter {
    std::string key;
    absl::Time deadline;
    KvGetCallback done;
  };
  struct Attempt {
    absl::flat_hash_map<std::string, std::string> values;
    std::vector<Waiter> waiters;
  };
  absl::flat_hash_map<AttemptId, Attempt> attempts_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_KV_STORE_H_
