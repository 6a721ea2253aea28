// Buffer synchronisation (DDP's broadcast_buffers): rank 0's buffers (running statistics, masks)
// are broadcast to every rank each step, so replicas cannot drift through their buffers.
//
// Bool buffers: there is no bool dtype on the wire. C++ bool is one byte holding 0 or 1, so on
// gloo a bool buffer travels in place as uint8. NCCL jobs refuse bool buffers unless
// `ignore_bool_buffers` (then they are skipped, like DDP's _ddp_params_and_buffers_to_ignore):
// CheckBuffersForBackend says so before any collective is issued.
//
// Thread-safety: free functions; the caller owns the buffers and must not touch them during a
// call.
#ifndef RINGLEADER_WORKER_SYNC_BUFFER_SYNC_H_
#define RINGLEADER_WORKER_SYNC_BUFFER_SYNC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct BufferSyncOptions {
  // Broadcast rank 0's buffers every step (DDP's default).
  bool broadcast_buffers = true;
  // Skip bool buffers (required on NCCL when the model has any).
  bool ignore_bool_buffers = false;
  // Timeout of each broadcast. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // Where the buffers' data lives (the model's memory): broadcasts run in place, so its kind
  // must be the collective's memory_kind() whenever there is something to broadcast.
  // nullptr = host memory. Not owned. (The GPU trainer has no buffers yet: GpuMlp refuses
  // model.with_buffers.)
  TensorMemory* memory = nullptr;
};

// Refuses a configuration before any collective. Errors: INVALID_ARGUMENT when `backend` is
// "nccl", some buffers are bool and ignore_bool_buffers is false — the message names the bool
// buffers and the setting (sync.ignore_bool_buffers: true); INVALID_ARGUMENT for a buffer with
// null data and a non-zero count (naming it).
absl::Status CheckBuffersForBackend(const std::string& backend,
                                    const std::vector<BufferInfo>& buffers,
                                    bool ignore_bool_buffers);

// Broadcasts every buffer from rank 0, in place, in the given order (float buffers as fp32, bool
// buffers as uint8 unless ignored); a no-op when !opts.broadcast_buffers. Otherwise runs
// CheckBuffersForBackend(comm->backend_name(), ...) first. Every rank must pass the same buffer
// list (names, types, counts). If `ledger` is non-null each broadcast is recorded in it (bucket
// id kTagBuffer) so the reducer's next ledger check covers it.
// Errors: those of CheckBuffersForBackend; INVALID_ARGUMENT when there are buffers to broadcast
// and opts.memory's kind is not the collective's (e.g. host buffers on NCCL); the collective's
// errors (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED) with the buffer's name prefixed.
absl::Status BroadcastBuffers(Collective* comm, const std::vector<BufferInfo>& buffers,
                              const BufferSyncOptions& opts, CollectiveLedger* ledger = nullptr);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_BUFFER_SYNC_H_
