// The NCCL (GPU) implementation of `Collective`: one rank per GPU, buffers in device memory.
//
// CreateNcclCollective relays rank 0's ncclUniqueId through the attempt's KeyValueStore (see
// nccl_unique_id.h), creates a NON-BLOCKING communicator (ncclCommInitRankConfig with
// config.blocking = 0) and polls ncclCommGetAsyncError until it is ready, fails, or the init
// deadline passes — so a rank that never shows up makes the others fail with DEADLINE_EXCEEDED
// instead of hanging, and ncclCommAbort can always tear the communicator down. Still inside the
// init deadline it runs the warm-up: an all-reduce of one float, then each operation of
// NcclOptions::warm_up (the kinds and sizes the job will issue). NCCL 2.28 connects lazily by
// default (NCCL_RUNTIME_CONNECT=1), per algorithm, the first time an operation selects it (see
// worker/collective/warm_up.h); without the warm-up that set-up would be charged to the first
// bucket's deadline. With it, every algorithm the listed operations select is connected (in
// either mode) before CreateNcclCollective returns. The warm-up's buffer (the largest listed
// operation, reduce-scatter and all-gather in place) is allocated for it, zeroed on the
// communication stream, and freed after.
//
// Streams and ordering (the caller's contract):
//   * The caller computes on `NcclOptions::compute_stream` (the trainer's stream; nullptr = the
//     legacy default stream). Every operation first records an event on the compute stream and
//     makes the communication stream wait for it, so the operation sees every kernel the caller
//     issued on the compute stream BEFORE the call (e.g. the backward kernels that wrote a
//     gradient bucket), without blocking the host. An operation given a mark
//     (CollectiveOptions::after, from MarkCompute: an event recorded on the compute stream then)
//     waits for that event instead, and not for the kernels issued after it; Work::OrderCompute
//     makes the compute stream wait for an operation's completion event, so the kernels the
//     caller issues next see its result without the host waiting for it.
//   * Operations run on one dedicated communication stream (non-blocking w.r.t. the legacy
//     stream), in issue order.
//   * Work::Wait() returns once the operation finished on the device: after it, any stream and
//     the host may use the result. Until then the buffer must not be touched.
//   * Calls may come from any thread (they are serialised). Each call sets the calling thread's
//     current CUDA device to `device` and leaves it set (the trainer thread uses that device
//     anyway).
//
// Work: the operation's completion event on the communication stream. Wait() polls it together
// with ncclCommGetAsyncError until done, an NCCL error (a peer died: UNAVAILABLE), Abort, or the
// operation's deadline (issue time + timeout: DEADLINE_EXCEEDED): for the first 50 µs it spins
// (yielding the thread between polls), then sleeps 5 µs, 10 µs, ... up to `poll_interval`
// (nccl_work.h, Backoff). IsDone() makes one such check without waiting (so a deadline also
// fires through IsDone). The two CUDA events of each operation come from a pool of the
// communicator's and go back to it (the completion event when the Work is destroyed): steady
// state creates none.
//
// Lifecycle (one Collective per rank per job attempt):
//
//   CreateNcclCollective
//     ├─ unique id / init / warm-up / join fails or times out ──> error (communicator aborted)
//     └─ ok ──> LIVE ──op error / op deadline──> DEAD (ncclCommAbort once; first error kept)
//                    ├──Abort(reason)──────────> DEAD (ABORTED(reason))
//                    └──Close(timeout)─────────> barrier ─ok─> ncclCommFinalize (polled)
//                                                  │            ─ok─> ncclCommDestroy ─> CLOSED
//                                                  └─any failure──> DEAD (ncclCommAbort)
//
//   In DEAD every pending Work and every later call fails at once with the first error; in
//   CLOSED with FAILED_PRECONDITION "closed". Abort is idempotent, callable from any thread, and
//   never waits for peers (ncclCommAbort). A successful attempt ends with Close (finalize, then
//   destroy); the destructor aborts the communicator if it is still live (the failure path):
//   Wait for every Work first.
//
//   After ncclCommAbort (Abort, a failed or timed-out operation, the destructor) the
//   communication stream is drained: an aborted NCCL kernel may still be writing its buffer
//   when ncclCommAbort returns. Abort, the destructor and every Work that fails return only
//   after the drain, so once the caller has seen the failure it may free the buffers it gave
//   (e.g. the reducer's arenas, freed on the compute stream). The drain waits at most
//   collective_timeout; a stream still busy then (or a device error) is appended to the
//   failure's message.
//
// Side channel (NcclOptions::side_channel; Collective::side_channel): a second communicator,
// ncclCommSplit of this one (every rank, color 0, key = its rank: the same ranks in the same
// order), non-blocking, with its own communication stream, split and warmed up (a one-float
// all-reduce, then warm_up's all-gathers) inside the init deadline, before the rank says it
// joined. Strategy fsdp gathers its parameters there, so a gather never queues behind the
// reducer's reduce-scatters: two operations on ONE communicator run one after the other on the
// device whatever streams they are issued on (NCCL serialises a communicator's kernels; they
// share its connections), and every rank must issue them in the same order — which a gather
// issued a layer ahead and a bucket completed by backward would not always keep on every rank.
// Two communicators each keep their own order (every rank issues each channel's operations in
// the same order, from one thread), and their kernels run side by side. NCCL asks for care
// there: kernels of two communicators can deadlock when one waits for a peer whose GPU cannot
// start the matching kernel until the first ends. Here each NCCL kernel waits on the device only
// for compute marks issued before it, never for the other channel's kernels, and a GPU of this
// class keeps the two communicators' few blocks resident beside compute, so neither channel's
// progress waits for the other's (NCCL_LAUNCH_ORDER_IMPLICIT is left unset: in its serial form it
// would put every gather behind the reduce-scatter issued before it). The side channel's Works
// have their own deadlines; failing or aborting this Collective fails the side channel too
// (CommState::set_dependent: aborted right after this communicator and drained before this
// one's stream, which may wait for compute that waits for a gather); a failed side channel
// fails its own operations only, and the caller's error path aborts this one. Close closes the
// side channel first (barrier, finalize, destroy), then this one.
//
// Barrier: an all-reduce (sum) of one float in a buffer zeroed at creation, on the
// communication stream before the warm-up, so it always carries 0.
//
// Data types: kFloat32 -> ncclFloat32, kBFloat16 -> ncclBfloat16, kUInt8 -> ncclUint8 (NCCL has
// no bool: carry bool buffers as uint8 and reduce them with kMax). kAvg -> ncclAvg (float types
// only; INVALID_ARGUMENT on uint8, like the gloo backend).
#ifndef RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_COLLECTIVE_H_
#define RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_COLLECTIVE_H_

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/collective.h"
#include "worker/collective/gpu/nccl_runtime.h"
#include "worker/collective/key_value_store.h"
#include "worker/collective/warm_up.h"

namespace ringleader {
namespace gpu {

struct NcclOptions {
  // Budget for the whole of CreateNcclCollective: waiting for rank 0's unique id, communicator
  // init, and (rank 0) waiting for every rank to join.
  absl::Duration init_timeout = absl::Seconds(120);
  // Timeout of each operation whose CollectiveOptions::timeout is zero.
  absl::Duration collective_timeout = absl::Seconds(60);
  // The longest pause between two polls of the event and ncclCommGetAsyncError while a Work,
  // init, an enqueue or finalize waits (each wait spins first, then backs off up to this).
  absl::Duration poll_interval = absl::Microseconds(200);
  // The stream the caller's kernels run on; operations wait for it (see above).
  cudaStream_t compute_stream = nullptr;
  // Reads time for deadlines and Work::Duration. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
  // Waits between polls; empty = absl::SleepFor. Tests pass one that advances a FakeClock.
  std::function<void(absl::Duration)> sleep;
  // The library calls; nullptr = RealNcclRuntime(). Tests pass a fake.
  std::shared_ptr<NcclRuntime> runtime;
  // What the warm-up issues after its one-float all-reduce, in this order (warm_up.h): kinds
  // kAllReduce, kReduceScatter, kAllGather, kBroadcast; elements >= 1; kAvg only on float types.
  std::vector<WarmUpOperation> warm_up;
  // Also create the side channel (see above): strategy fsdp's parameter gathers.
  bool side_channel = false;
};

// Creates rank `rank` of `world_size` on CUDA device `device`, rendezvousing under `key_prefix`
// (unique per job attempt, e.g. "<job>/<generation>/") in `store`. Returns a live Collective
// (backend_name() "nccl", memory_kind() kDevice).
// Errors:
//   INVALID_ARGUMENT  rank/world_size/device/timeouts out of range, empty prefix, null store, a
//                     warm-up operation of another kind, no elements or kAvg on uint8;
//   FAILED_PRECONDITION "no usable GPU: ..." (no driver / no such device);
//   DEADLINE_EXCEEDED  rank 0's unique id never came ("rank 0 never published it"), init or
//                      a warm-up operation ("connecting to the other ranks") did not finish
//                      (the message lists the ranks that never started init and, on ranks != 0,
//                      names rank 0's bootstrap as the usual culprit), or (rank 0) some rank
//                      never joined;
//   UNAVAILABLE        NCCL reported a remote/system error during init (a peer died; on ranks
//                      != 0 the message names rank 0, whose process hosts the bootstrap);
//   RESOURCE_EXHAUSTED the warm-up's buffer (its largest operation) does not fit on the GPU;
//   any of these, prefixed "creating the side channel: ", for the side channel's split,
//   stream, buffer or warm-up;
//   the store's UNAVAILABLE / FAILED_PRECONDITION; INTERNAL for other NCCL/CUDA failures.
absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& key_prefix, int rank, int world_size,
    int device, const NcclOptions& options = {});

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GPU_NCCL_COLLECTIVE_H_
