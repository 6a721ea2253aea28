// A per-job-attempt key-value store, as the rendezvous of a collective backend sees it (gloo's
// store; the NCCL unique-id relay). The worker implements it over the coordinator's KvSet/KvGet
// RPCs bound to one (job, generation); tests use InMemoryKeyValueStore.
#ifndef RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
#define RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringleader {

// Thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Sets `key` (overwrites). Errors: UNAVAILABLE (coordinator unreachable), FAILED_PRECONDITION
  // (the attempt is stale or over).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists or `timeout` passes. Errors: DEADLINE_EXCEEDED naming the key,
  // UNAVAILABLE, FAILED_PRECONDITION.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
