#include "worker/collective/collective_util.h"

#include "absl/strings/str_cat.h"
#include "worker/collective/host_ops.h"

namespace ringleader {

std::string DescribeOperation(const char* backend, int rank, int world_size,
                              const std::string& what, int bucket, size_t count) {
  return absl::StrCat(backend, " rank ", rank, "/", world_size, " ", what, " bucket ", bucket,
                      " count ", count);
}

std::shared_ptr<FinishableWork> RefuseInvalid(const std::string& description,
                                              const absl::Status& valid, absl::Duration timeout) {
  absl::Status refused = valid.ok() ? ValidateTimeout(timeout) : valid;
  if (refused.ok()) return nullptr;
  auto work = std::make_shared<FinishableWork>();
  work->Finish(absl::InvalidArgumentError(absl::StrCat(description, ": ", refused.message())),
               absl::ZeroDuration());
  return work;
}

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
