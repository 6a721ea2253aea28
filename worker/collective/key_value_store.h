// A per-job-attempt key-value store, as the rendezvous of a collective backend sees it (gloo's
// store; the NCCL unique-id relay). The worker implements it over the coordinator's
// KvSet/KvGet/KvGetMany RPCs bound to one (job, generation); tests use InMemoryKeyValueStore.
#ifndef RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
#define RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/value_parts.h"

namespace ringleader {

// Which bytes of each value GetMany answers: common/value_parts.h (as the coordinator's
// KvGetMany cuts them).

// Thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Sets `key` (overwrites). Errors: UNAVAILABLE (coordinator unreachable), FAILED_PRECONDITION
  // (the attempt is stale or over).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists or `timeout` passes. Errors: DEADLINE_EXCEEDED naming the key
  // (with a RankFailure PEER_TIMED_OUT, common/rank_failure.h: the rank that was to set it never
  // did), UNAVAILABLE, FAILED_PRECONDITION.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  // Blocks until EVERY key exists or `timeout` passes (one timeout for all); returns the values,
  // cut by `parts`, in `keys` order. Errors: as Get (DEADLINE_EXCEEDED names a missing key),
  // INVALID_ARGUMENT (`parts` without one index per key, or an index >= parts.count).
  // This default reads key by key (GetEachKey on the real clock).
  virtual absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                           const ValueParts& parts,
                                                           absl::Duration timeout);
};

// GetMany as one Get per key, in order, all within `timeout` measured on `clock` (not owned).
absl::StatusOr<std::vector<std::string>> GetEachKey(KeyValueStore* store,
                                                    const std::vector<std::string>& keys,
                                                    const ValueParts& parts, absl::Duration timeout,
                                                    Clock* clock);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
