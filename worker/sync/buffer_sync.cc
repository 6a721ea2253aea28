#include "worker/sync/buffer_sync.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringleader {

absl::Status CheckBuffersForBackend(const std::string& backend,
                                    const std::vector<BufferInfo>& buffers,
                                    bool ignore_bool_buffers) {
  std::vector<std::string> bool_buffers;
  for (const BufferInfo& b : buffers) {
    if (b.data == nullptr && b.count > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", b.name, "' has ", b.count, " elements but no data"));
    }
    if (b.type == BufferType::kBool) bool_buffers.push_back(b.name);
  }
  if (backend == "nccl" && !bool_buffers.empty() && !ignore_bool_buffers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has bool buffers (", absl::StrJoin(bool_buffers, ", "),
        ") and NCCL has no bool type, so they cannot be broadcast; set "
        "sync.ignore_bool_buffers: true to skip them (each rank then keeps its own), or "
        "sync.broadcast_buffers: false"));
  }
  return absl::OkStatus();
}

absl::Status BroadcastBuffers(Collective* comm, const std::vector<BufferInfo>& buffers,
                              const BufferSyncOptions& opts, CollectiveLedger* ledger) {
  if (comm == nullptr) return absl::InvalidArgumentError("buffer broadcast: comm is null");
  // Nothing is broadcast: nothing to refuse (the bool-buffer error suggests exactly this).
  if (!opts.broadcast_buffers) return absl::OkStatus();
  RETURN_IF_ERROR(CheckBuffersForBackend(comm->backend_name(), buffers, opts.ignore_bool_buffers));
  bool any = false;
  for (const BufferInfo& b : buffers) {
    any = any || (b.count > 0 && !(b.type == BufferType::kBool && opts.ignore_bool_buffers));
  }
  if (any) RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "buffer broadcast"));
  CollectiveOptions copts;
  copts.timeout = opts.timeout;
  copts.bucket = kTagBuffer;
  // Issue every broadcast, then wait: the backend pipelines them. Each buffer is contiguous, so
  // it is broadcast in place (bool is one byte holding 0 or 1: it travels as uint8).
  std::vector<std::pair<const BufferInfo*, std::shared_ptr<Work>>> works;
  for (const BufferInfo& b : buffers) {
    if (b.count == 0) continue;
    if (b.type == BufferType::kBool && opts.ignore_bool_buffers) continue;
    static_assert(sizeof(bool) == 1, "bool buffers travel as uint8");
    const DataType dtype = b.type == BufferType::kBool ? DataType::kUInt8 : DataType::kFloat32;
    if (ledger != nullptr) ledger->Record(CollectiveKind::kBroadcast, kTagBuffer, b.count, dtype);
    works.emplace_back(&b, comm->Broadcast(TensorView{b.data, b.count, dtype}, 0, copts));
  }
  absl::Status first_error;
  for (auto& [buffer, work] : works) {
    absl::Status s = work->Wait();
    if (!s.ok() && first_error.ok()) {
      first_error = absl::Status(
          s.code(), absl::StrCat("broadcast of buffer '", buffer->name, "' failed: ", s.message()));
    }
  }
  return first_error;
}

}  // namespace ringleader
