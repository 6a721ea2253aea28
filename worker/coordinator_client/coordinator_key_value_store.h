// `KeyValueStore` over the coordinator's KvSet/KvGet/KvGetMany RPCs, bound to one job attempt
// (job_id, generation). This is the gloo rendezvous store (and the NCCL unique-id relay) of a
// rank process.
//
// Get(key, timeout) loops KvGet long polls of at most `poll_interval` each until the key appears
// or `timeout` (measured on the injected clock) has passed, so one slow rank does not need one
// huge RPC deadline and a dead coordinator is noticed within one poll. GetMany loops KvGetMany
// polls the same way; a coordinator without KvGetMany (UNIMPLEMENTED) is then read key by key
// with Get, for the rest of this store's life.
//
// Thread-safety: thread-safe (gloo calls it from several threads). Owned by the rank process;
// the client must outlive it.
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_KEY_VALUE_STORE_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_KEY_VALUE_STORE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/key_value_store.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

struct CoordinatorKeyValueStoreOptions {
  // Longest single KvGet long poll.
  absl::Duration poll_interval = absl::Seconds(5);
  // Time source for Get's overall timeout. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
};

class CoordinatorKeyValueStore : public KeyValueStore {
 public:
  CoordinatorKeyValueStore(CoordinatorClient* client, std::string job_id, uint64_t generation,
                           CoordinatorKeyValueStoreOptions options = {});

  // Errors: the KvSet errors (UNAVAILABLE, FAILED_PRECONDITION for a stale or finished attempt).
  absl::Status Set(const std::string& key, const std::string& value) override;
  // Errors: DEADLINE_EXCEEDED naming the key when it did not appear within `timeout`;
  // UNAVAILABLE; FAILED_PRECONDITION (stale attempt, job ended while waiting); CANCELLED.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  // Errors: DEADLINE_EXCEEDED naming the first key still missing after `timeout`; as Get;
  // INVALID_ARGUMENT (bad `parts`).
  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   const ValueParts& parts,
                                                   absl::Duration timeout) override;

 private:
  CoordinatorClient* const client_;
  const std::string job_id_;
  const uint64_t generation_;
  const CoordinatorKeyValueStoreOptions options_;
  Clock* const clock_;
  // Cleared when the coordinator answers KvGetMany with UNIMPLEMENTED.
  std::atomic<bool> has_get_many_{true};
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_COORDINATOR_KEY_VALUE_STORE_H_
