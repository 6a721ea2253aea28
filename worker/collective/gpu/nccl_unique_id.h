// The NCCL unique-id relay: how the ranks of one job attempt agree on the 128-byte
// ncclUniqueId through the attempt's KeyValueStore (the coordinator's KvSet/KvGet).
//
// Keys, all under the attempt's `key_prefix` (unique per job and generation):
//   <prefix>nccl/unique_id    the 128 id bytes, set once by rank 0
//   <prefix>nccl/started/<r>  set by rank r just before it starts communicator init
//   <prefix>nccl/joined/<r>   set by rank r once its communicator is ready
//
// Protocol (see NcclCollective for the communicator init between the steps):
//
//   rank 0                                   rank r != 0
//   ncclGetUniqueId (opens the bootstrap     Get(unique_id, timeout) ──deadline──>
//   DEADLINE_EXCEEDED
//     listener IN THIS PROCESS)                 "rank r waited T for rank 0's NCCL unique id ..."
//   Set(unique_id) ───────────────────────>  (id)
//   Set(started/0), init communicator        Set(started/r), init communicator
//   Set(joined/0)                            Set(joined/r)
//   WaitAllJoined(deadline) ──────────────── every joined/r seen ──> OK
//                          └──deadline──> DEADLINE_EXCEEDED naming the ranks that never joined
//
// Lifetime rule: ncclGetUniqueId starts NCCL's bootstrap root (a listening socket and a thread)
// in the process that calls it, and every rank's communicator init connects to it. That process
// (rank 0) must stay alive until every rank has joined; WaitAllJoined is how rank 0 knows. If
// rank 0 dies first, the other ranks' init fails or times out: NcclCollective's error then
// names rank 0.
//
// All functions are thread-safe if the store is.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_UNIQUE_ID_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_UNIQUE_ID_H_

#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {
namespace gpu {

std::string NcclUniqueIdKey(const std::string& key_prefix);
std::string NcclStartedKey(const std::string& key_prefix, int rank);
std::string NcclJoinedKey(const std::string& key_prefix, int rank);

// Makes a fresh id; ncclGetUniqueId in production, a fake in tests.
using UniqueIdMaker = std::function<ncclResult_t(ncclUniqueId*)>;

// Rank 0: makes the id with `make_id` and publishes it. Other ranks: wait up to `timeout` for
// rank 0's id. Returns the id (byte-identical on every rank).
// Errors: INVALID_ARGUMENT (rank outside [0, world_size)); DEADLINE_EXCEEDED
// "rank R waited T for rank 0's NCCL unique id (key K): rank 0 never published it";
// INTERNAL if the stored value is not exactly NCCL_UNIQUE_ID_BYTES long or ncclGetUniqueId
// failed; the store's UNAVAILABLE / FAILED_PRECONDITION, with context.
absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(KeyValueStore& store,
                                                  const std::string& key_prefix, int rank,
                                                  int world_size, absl::Duration timeout,
                                                  const UniqueIdMaker& make_id = ncclGetUniqueId);

// Sets <prefix>nccl/started/<rank> / <prefix>nccl/joined/<rank>. Errors: the store's.
absl::Status PublishStarted(KeyValueStore& store, const std::string& key_prefix, int rank);
absl::Status PublishJoined(KeyValueStore& store, const std::string& key_prefix, int rank);

// Waits until every rank in [0, world_size) has published joined, or `deadline` (read through
// `clock`) passes. Errors: DEADLINE_EXCEEDED naming every rank that had not joined; the store's.
absl::Status WaitAllJoined(KeyValueStore& store, const std::string& key_prefix, int world_size,
                           absl::Time deadline, const Clock& clock);

// The ranks in [0, world_size) whose `key_for(rank)` is not set right now (each probed once
// with a zero timeout). For error messages; store errors count as "not set".
std::vector<int> RanksWithoutKey(KeyValueStore& store, int world_size,
                                 const std::function<std::string(int)>& key_for);

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_UNIQUE_ID_H_
