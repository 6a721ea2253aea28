// The per-attempt key-value store behind KvSet/KvGet/KvGetMany: gloo's rendezvous store and the
// NCCL unique-id relay. Keys live in the namespace of one attempt (job, generation), so a
// restarted attempt never reads what a stale one wrote.
#ifndef RINGLEADER_COORDINATOR_CORE_KV_STORE_H_
#define RINGLEADER_COORDINATOR_CORE_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/value_parts.h"
#include "coordinator/core/attempt_id.h"
#include "coordinator/core/deferred_callbacks.h"

namespace ringleader {

using KvGetCallback = std::function<void(absl::StatusOr<std::string>)>;
using KvGetManyCallback = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

// Which bytes of each value a multi-key read answers (see common/value_parts.h).
using KvParts = ValueParts;

// Not thread-safe: owned by the Coordinator and used under its lock. Completions are never run
// directly: they are added to the caller's DeferredCallbacks, to run after the lock is released.
// Checking that the attempt is current and live is the caller's job.
class AttemptKvStore {
 public:
  // How many keys attempt `attempt` holds, and whether it holds `key`.
  size_t KeyCount(const AttemptId& attempt) const;
  bool Has(const AttemptId& attempt, const std::string& key) const;

  // Sets (overwrites) `key` and completes every Get waiting for it with `value`, and every
  // GetMany whose last missing key it was.
  void Set(const AttemptId& attempt, const std::string& key, std::string value,
           DeferredCallbacks* deferred);

  // Completes `done` with the value if `key` exists. Otherwise, when `deadline` <= `now`,
  // completes it with DEADLINE_EXCEEDED naming the key; else parks it until Set or
  // ExpireWaiters or EndAttempt.
  void Get(const AttemptId& attempt, const std::string& key, absl::Time deadline, absl::Time now,
           KvGetCallback done, DeferredCallbacks* deferred);

  // Like Get for several keys at once: completes `done` with every value (cut by `parts`), in
  // `keys` order, once all exist; DEADLINE_EXCEEDED names the first key still missing. No keys
  // completes at once. INVALID_ARGUMENT (at once) when `parts` has an index per key missing or
  // out of range.
  void GetMany(const AttemptId& attempt, std::vector<std::string> keys, KvParts parts,
               absl::Time deadline, absl::Time now, KvGetManyCallback done,
               DeferredCallbacks* deferred);

  // Completes every parked Get and GetMany whose deadline is <= `now` with DEADLINE_EXCEEDED.
  void ExpireWaiters(absl::Time now, DeferredCallbacks* deferred);

  // Drops the attempt's keys and completes its parked Gets and GetManys with `why` (not OK).
  void EndAttempt(const AttemptId& attempt, const absl::Status& why, DeferredCallbacks* deferred);

  // Completes every parked Get and GetMany of every attempt with `why` (shutdown).
  void FailAllWaiters(const absl::Status& why, DeferredCallbacks* deferred);

  // Number of parked Gets and GetManys (tests).
  int waiter_count() const;

 private:
  struct Waiter {
    std::string key;
    absl::Time deadline;
    KvGetCallback done;
  };
  struct ManyWaiter {
    std::vector<std::string> keys;
    KvParts parts;
    size_t missing;  // index of the first key not set yet; the keys before it all exist
    absl::Time deadline;
    KvGetManyCallback done;
  };
  struct Attempt {
    absl::flat_hash_map<std::string, std::string> values;
    std::vector<Waiter> waiters;
    std::vector<ManyWaiter> many_waiters;
  };

  // Moves `waiter.missing` past the keys that exist; true when none is missing any more.
  static bool Advance(const Attempt& entry, ManyWaiter* waiter);
  // Every value (or part) `waiter` asked for; all its keys exist.
  static std::vector<std::string> Collect(const Attempt& entry, const ManyWaiter& waiter);

  absl::flat_hash_map<AttemptId, Attempt> attempts_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_KV_STORE_H_
