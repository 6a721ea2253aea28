#include "worker/collective/collective_util.h"

#include "absl/strings/str_cat.h"

namespace ringleader {

absl::Status ValidateRendezvousArgs(const KeyValueStore* store, const std::string& key_prefix,
                                    const std::string& prefix_example, int rank, int world_size) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null; pass the attempt's store");
  if (key_prefix.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key_prefix is empty; use one unique per job attempt, e.g. \"", prefix_example, "\""));
  }
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size is ", world_size, "; it must be >= 1"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is out of range; it must be in [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBackendTimeouts(const std::string& options, absl::Duration rendezvous_timeout,
                                     absl::Duration collective_timeout) {
  for (const auto& [name, d] : {std::make_pair("rendezvous_timeout", rendezvous_timeout),
                                std::make_pair("collective_timeout", collective_timeout)}) {
    if (d < absl::Milliseconds(1) || d == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options, ".", name, " is ", absl::FormatDuration(d), "; it must be finite and >= 1ms"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringleader
