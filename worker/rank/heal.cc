#include "worker/rank/heal.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status Broadcast(Collective* comm, StagedBytes* buffer, int root, absl::Duration timeout) {
  CollectiveOptions options;
  options.timeout = timeout;
  RETURN_IF_ERROR(buffer->Upload());
  RETURN_IF_ERROR(comm->Broadcast(buffer->view(), root, options)->Wait());
  return buffer->Download();
}

}  // namespace

absl::StatusOr<std::string> BroadcastBytes(Collective* comm, TensorMemory* memory, int root,
                                           std::string bytes, absl::Duration timeout) {
  if (root < 0 || root >= comm->world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("heal: root rank ", root, " is outside the group of ", comm->world_size()));
  }
  const bool sender = comm->rank() == root;
  if (!sender) bytes.clear();
  CollectiveOptions options;
  options.timeout = timeout;
  if (memory->host_accessible()) {
    // Host memory (gloo, shared memory): the bytes go straight from the sender's string into
    // the receivers', no staging.
    uint64_t size = bytes.size();
    RETURN_IF_ERROR(
        comm->Broadcast(TensorView{&size, sizeof(size), DataType::kUInt8}, root, options)->Wait());
    if (size == 0) return std::string();
    if (!sender) bytes.resize(size);
    RETURN_IF_ERROR(
        comm->Broadcast(TensorView{bytes.data(), size, DataType::kUInt8}, root, options)->Wait());
    return bytes;
  }
  ASSIGN_OR_RETURN(StagedBytes length, StagedBytes::Create(memory, sizeof(uint64_t)));
  const uint64_t size = bytes.size();
  std::memcpy(length.host(), &size, sizeof(size));
  RETURN_IF_ERROR(Broadcast(comm, &length, root, timeout));
  uint64_t received = 0;
  std::memcpy(&received, length.host(), sizeof(received));
  if (received == 0) return std::string();
  ASSIGN_OR_RETURN(StagedBytes payload, StagedBytes::Create(memory, received));
  if (sender) std::memcpy(payload.host(), bytes.data(), bytes.size());
  RETURN_IF_ERROR(Broadcast(comm, &payload, root, timeout));
  if (sender) return bytes;
  return std::string(reinterpret_cast<const char*>(payload.host()), payload.size());
}

}  // namespace ringleader
