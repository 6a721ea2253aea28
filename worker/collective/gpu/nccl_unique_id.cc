#include "worker/collective/gpu/nccl_unique_id.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gpu/cuda_status.h"
#include "common/status_macros.h"

namespace ringleader {
namespace gpu {

std::string NcclUniqueIdKey(const std::string& key_prefix) {
  return absl::StrCat(key_prefix, "nccl/unique_id");
}

std::string NcclStartedKey(const std::string& key_prefix, int rank) {
  return absl::StrCat(key_prefix, "nccl/started/", rank);
}

std::string NcclJoinedKey(const std::string& key_prefix, int rank) {
  return absl::StrCat(key_prefix, "nccl/joined/", rank);
}

absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(KeyValueStore& store,
                                                  const std::string& key_prefix, int rank,
                                                  int world_size, absl::Duration timeout,
                                                  const UniqueIdMaker& make_id) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside [0, world_size ",
                                                   world_size, "): give 0 <= rank < world_size"));
  }
  const std::string key = NcclUniqueIdKey(key_prefix);
  ncclUniqueId id;
  if (rank == 0) {
    RL_NCCL_RETURN_IF_ERROR(make_id(&id));
    absl::Status set = store.Set(key, std::string(id.internal, sizeof(id.internal)));
    if (!set.ok()) {
      return WithPrefix(set, absl::StrCat("rank 0 could not publish the NCCL unique id (key ",
                                          key, "): "));
    }
    return id;
  }
  absl::StatusOr<std::string> value = store.Get(key, timeout);
  if (absl::IsDeadlineExceeded(value.status())) {
    return WithMessage(value.status(),
                       absl::StrCat("rank ", rank, " waited ", absl::FormatDuration(timeout),
                                    " for rank 0's NCCL unique id (key ", key,
                                    "): rank 0 never published it"));
  }
  if (!value.ok()) {
    return WithPrefix(value.status(), absl::StrCat("rank ", rank,
                                                   " could not read rank 0's NCCL unique id (key ",
                                                   key, "): "));
  }
  if (value->size() != sizeof(id.internal)) {
    return absl::InternalError(absl::StrCat("the NCCL unique id under key ", key, " has ",
                                            value->size(), " bytes, expected ", sizeof(id.internal),
                                            ": the store corrupted it"));
  }
  std::memcpy(id.internal, value->data(), sizeof(id.internal));
  return id;
}

absl::Status PublishStarted(KeyValueStore& store, const std::string& key_prefix, int rank) {
  return store.Set(NcclStartedKey(key_prefix, rank), "1");
}

absl::Status PublishJoined(KeyValueStore& store, const std::string& key_prefix, int rank) {
  return store.Set(NcclJoinedKey(key_prefix, rank), "1");
}

std::vector<int> RanksWithoutKey(KeyValueStore& store, int world_size,
                                 const std::function<std::string(int)>& key_for) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (!store.Get(key_for(r), absl::ZeroDuration()).ok()) missing.push_back(r);
  }
  return missing;
}

absl::Status WaitAllJoined(KeyValueStore& store, const std::string& key_prefix, int world_size,
                           absl::Time deadline, const Clock& clock) {
  for (int r = 0; r < world_size; ++r) {
    const absl::Duration left = deadline - clock.Now();
    absl::StatusOr<std::string> joined =
        store.Get(NcclJoinedKey(key_prefix, r), std::max(left, absl::ZeroDuration()));
    if (joined.ok()) continue;
    if (!absl::IsDeadlineExceeded(joined.status())) {
      return WithPrefix(joined.status(),
                        absl::StrCat("waiting for rank ", r, " to join the NCCL communicator: "));
    }
    // Name every latecomer, not only the first one.
    const std::vector<int> missing = RanksWithoutKey(
        store, world_size, [&](int rank) { return NcclJoinedKey(key_prefix, rank); });
    return WithMessage(
        joined.status(),
        absl::StrCat("rank(s) ",
                     absl::StrJoin(missing.empty() ? std::vector<int>{r} : missing, ","),
                     " never joined the NCCL communicator (no key ", NcclJoinedKey(key_prefix, r),
                     " ...) before the init deadline"));
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace ringleader
