// The collective-communication interface every backend implements (gloo on CPU today, NCCL on
// GPU). The reducer, drift check and trainer see only this interface.
//
// Model: a `Collective` belongs to one rank of one job attempt. Operations are asynchronous and
// run in the order they were issued (like a stream); each returns a `Work` the caller waits on.
// Buffers are `TensorView`s: host memory for gloo, device memory for NCCL — the backend says
// which through `memory_kind()`. A buffer must stay alive and untouched until its Work is done.
//
// Errors (every Work::Wait and Abort): DEADLINE_EXCEEDED (a collective passed its timeout),
// UNAVAILABLE (a peer went away / transport error), ABORTED (Abort() was called: the whole
// attempt must be restarted at a higher level), INVALID_ARGUMENT (bad view or root),
// INTERNAL (backend bug). After any error other than INVALID_ARGUMENT the Collective is dead:
// every later call fails with the same status and a new one must be created (new rendezvous).
//
// Lifecycle:  created (rendezvous done) ──ops──> LIVE ──Close(timeout) ok──> CLOSED
//                                                  ├──an op fails / Abort──> DEAD (aborted)
//                                                  └──destroyed while live─> DEAD (aborted)
#ifndef RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_H_
#define RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringleader {

// Where a collective's rendezvous is, for the rank's liveness reports: exchanging addresses
// (detail e.g. "waiting for 3 peers' addresses"), then connecting to each peer in turn
// ("to rank 0 at 10.1.0.2:41729"). Called on the thread doing the rendezvous.
enum class RendezvousStage { kExchangingAddresses, kConnecting };
using RendezvousProgress = std::function<void(RendezvousStage stage, const std::string& detail)>;

enum class DataType { kFloat32, kBFloat16, kUInt8 };

// What a collective does (the numbers are those of the wire records and of
// v1::CollectiveOp).
enum class CollectiveKind : uint32_t {
  kNone = 0,  // padding in the ledger's record exchange: "this rank issued nothing here"
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kBarrier = 5,
};
const char* CollectiveKindName(CollectiveKind kind);
enum class ReduceOp { kSum, kAvg, kMax };
enum class MemoryKind { kHost, kDevice };

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);

// A contiguous typed buffer. Not owning.
struct TensorView {
  void* data = nullptr;
  size_t count = 0;  // elements, not bytes
  DataType dtype = DataType::kFloat32;

  size_t bytes() const { return count * DataTypeSize(dtype); }
};

// A point in the caller's compute stream: every kernel issued there before
// Collective::MarkCompute took it (a CUDA event on NCCL). Opaque; one mark may order many
// operations. Host backends hand out marks that order nothing: the caller's host compute is
// over when it issues an operation.
class ComputeMark {
 public:
  virtual ~ComputeMark() = default;
};

// Per-operation options.
struct CollectiveOptions {
  // Fails the operation with DEADLINE_EXCEEDED after this long (0 = the Collective's default).
  absl::Duration timeout = absl::ZeroDuration();
  // Bucket id (or -1) carried into the fingerprint and into error messages.
  int bucket = -1;
  // Device backends: what the operation waits for on the compute stream before it runs.
  // Null (the default, always safe): every kernel issued there before the call. A mark from
  // this Collective's MarkCompute (or its side channel's: they share the compute stream): only
  // the kernels issued before the mark. The caller vouches that nothing it issues on the
  // compute stream after the mark writes the operation's input, or reads or writes its output,
  // until the operation is ordered before that compute (Work::OrderCompute or Wait). Host
  // backends ignore it.
  std::shared_ptr<const ComputeMark> after;
};

// A pending operation. Thread-safe.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation has finished; returns its status. May be called repeatedly.
  virtual absl::Status Wait() = 0;
  // True once the operation has finished (successfully or not). Never blocks.
  virtual bool IsDone() const = 0;
  // How long the operation itself ran (zero until done).
  virtual absl::Duration Duration() const = 0;
  // When the backend started running the operation on this rank (from then on it waits for
  // its peers or transfers), on the backend's clock, for hang forensics. nullopt: not started
  // yet, or the backend cannot tell (NCCL runs it on a stream).
  virtual std::optional<absl::Time> StartTime() const { return std::nullopt; }
  // Orders the caller's compute after the operation: kernels issued on the compute stream after
  // this call see its result. Device backends do it without blocking the host (NCCL: the
  // compute stream waits for the operation's completion event); host backends Wait(). Errors:
  // device backends only what is known now (the operation was refused, or its communicator has
  // failed); a later failure shows at Wait() (an aborted operation's event completes, its
  // output undefined), so the caller still waits for every operation before it trusts a
  // result. Host backends: Wait()'s.
  virtual absl::Status OrderCompute() { return Wait(); }
};

// One rank's view of a communicator. Owned by the rank process; methods may be called from any
// thread, operations keep issue order.
class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;
  virtual MemoryKind memory_kind() const = 0;

  // In-place all-reduce of `buf`. kAvg divides the sum by world_size().
  virtual std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                          const CollectiveOptions& opts = {}) = 0;
  // In-place broadcast of `buf` from `root`.
  virtual std::shared_ptr<Work> Broadcast(TensorView buf, int root,
                                          const CollectiveOptions& opts = {}) = 0;
  // `out` holds world_size() × in.count elements; rank r's input lands at r × in.count.
  virtual std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                          const CollectiveOptions& opts = {}) = 0;
  // `in` holds world_size() × out.count elements; rank r receives the reduction of slice r.
  virtual std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                              const CollectiveOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> Barrier(const CollectiveOptions& opts = {}) = 0;

  // The compute stream's current position, for CollectiveOptions::after. Host backends: a
  // mark that orders nothing. Errors (device backends): the communicator's first error once it
  // failed; recording the event's.
  virtual absl::StatusOr<std::shared_ptr<const ComputeMark>> MarkCompute();

  // A second channel to the same ranks for operations that must neither queue behind this one's
  // nor delay them (strategy fsdp's parameter gathers beside the gradient reduce-scatters), or
  // null when the backend has none (then the caller uses this one). NCCL: a second
  // communicator (ncclCommSplit of this one, created with it when NcclOptions::side_channel
  // asks) on its own communication stream. Owned by this Collective, valid while it lives.
  // Each channel keeps its own issue order, and every rank must issue the same operations on
  // each channel in the same order (how the two channels' operations interleave may differ
  // between ranks). Failing or aborting this Collective fails the side channel too; a failure of
  // the side channel fails its own operations, and the caller's failure path then aborts this
  // one. Close closes the side channel first, then this one.
  virtual Collective* side_channel() { return nullptr; }

  // Fails every pending and future operation with ABORTED(reason) as soon as possible
  // (ncclCommAbort on NCCL; on gloo the transport is torn down). Idempotent; never blocks on
  // peers.
  virtual void Abort(const absl::Status& reason) = 0;

  // Ends a successful attempt cleanly. Every rank calls it after its last operation (and after
  // waiting for every Work): it waits, up to `timeout`, until all ranks have called it (a
  // barrier), then releases the communicator gracefully (NCCL: ncclCommFinalize, which flushes
  // the peers' pending traffic, then ncclCommDestroy). Afterwards every call fails with
  // FAILED_PRECONDITION "closed". Failure paths do not call it: they Abort, or destroy the
  // Collective, which aborts.
  // Errors: the barrier's (DEADLINE_EXCEEDED when a peer never closes, UNAVAILABLE when one went
  // away), the first error if the Collective is already dead; on any error the communicator is
  // aborted instead.
  virtual absl::Status Close(absl::Duration timeout) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_H_
