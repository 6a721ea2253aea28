// The shared-memory implementation of `Collective` for ranks on one host (CPU, host memory).
//
// Ranks of one machine have no reason to talk through loopback TCP: gloo's ring all-reduce of
// 1 MiB between two processes of one host takes ~2 ms of socket round trips, which is longer than
// the step of a small model. Here every rank maps one POSIX shared-memory segment and the ranks
// copy, reduce and read each other's data directly (a copy in, a reduction of 1/N of the data,
// a copy out), synchronised by counters in the segment and a futex.
//
// Segment (created by rank 0, named "/ringleader-<job>-<generation>-<random>", mode 0600):
//
//   [ header: magic, token, world size, slot size, bell (futex word), waiters ]
//   [ one block per rank: barriers arrived at, pid, abort reason ]
//   [ one slot per rank, each two halves (double-buffered: consecutive chunks alternate) ]
//
// Rendezvous (through the attempt's key-value store, keys under `key_prefix`):
//   rank 0 creates the segment and publishes its name, token and size ("shm/segment"); every
//   rank maps it, checks the token and publishes "ok" or why not ("shm/mapped/<rank>"); every
//   rank reads every answer, and rank 0 then unlinks the name (the mappings stay; nothing is
//   left in /dev/shm once the ranks exit). When EVERY rank mapped it the result is a live
//   collective; otherwise (a rank on another host, another /dev/shm, another user) every rank
//   alike gets no collective and the reason, so they can all fall back to TCP together.
//
// Operations run one at a time, in issue order, on one communication thread; each is cut into
// chunks of half a slot. Per chunk: all-reduce = copy in, barrier, reduce this rank's 1/N of
// the chunk in rank order (sum: ((s0 + s1) + s2) + ...), publish it, barrier, copy the others'
// parts out; broadcast, all-gather, reduce-scatter = copy in, barrier, copy/reduce out; barrier
// = barrier. Results are bit-identical on every rank and across reruns (one fixed reduction
// order); for 2 ranks they equal gloo's ring. Reductions and dtypes as the gloo backend
// (host_ops.h).
//
// Errors: DEADLINE_EXCEEDED (an operation passed its timeout: the message names the ranks that
// never arrived), UNAVAILABLE (a peer's process is gone, or a peer aborted: its reason is
// quoted), ABORTED (Abort() on this rank), INVALID_ARGUMENT (bad view, root, dtype/op; the
// collective stays live).
//
// Lifecycle:
//
//   CreateShmCollective ──every rank mapped──> LIVE ──Close(timeout) ok──> CLOSED
//                       └─some rank could not─> no collective (reason)
//                                              LIVE ──op fails──> DEAD (first error, sticky)
//                                              LIVE ──Abort / destroyed──> DEAD; the peers'
//                                                     waits end at once with UNAVAILABLE
//
// Thread-safety: every method may be called from any thread.
#ifndef RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_COLLECTIVE_H_
#define RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_COLLECTIVE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

struct ShmOptions {
  // Bytes of each rank's slot (two halves; an operation moves at most half a slot per chunk).
  // Rounded up to a multiple of 8 KiB. Pages of the segment are only allocated when touched.
  size_t slot_bytes = size_t{8} << 20;  // 8 MiB
  // Bound on the whole rendezvous (every key-value wait).
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // Timeout of each operation whose CollectiveOptions::timeout is zero.
  absl::Duration collective_timeout = absl::Seconds(60);
  // Measures Work::Duration and the operations' deadlines. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
  // Told where the rendezvous is (liveness reports). Empty = nothing.
  RendezvousProgress on_progress;
};

// What the rendezvous gave: a live collective, or (every rank alike) none and why.
struct ShmRendezvous {
  std::unique_ptr<Collective> collective;
  // When `collective` is null: which ranks could not map the segment and why, e.g.
  // "rank 1: shm_open /ringleader-...: No such file or directory".
  std::string unavailable;
};

// Rendezvouses rank `rank` of `world_size` under `key_prefix` (unique per job attempt) in `store`.
// (backend_name() "shm", memory_kind() kHost).
// Errors: INVALID_ARGUMENT (rank, world_size, prefix, options out of range, naming the field),
// DEADLINE_EXCEEDED (a rank did not answer within rendezvous_timeout; names the key),
// UNAVAILABLE / FAILED_PRECONDITION (the store's).
absl::StatusOr<ShmRendezvous> CreateShmCollective(std::shared_ptr<KeyValueStore> store,
                                                  const std::string& key_prefix, int rank,
                                                  int world_size, const ShmOptions& opts = {});

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_COLLECTIVE_H_
