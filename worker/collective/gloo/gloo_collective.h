// The gloo (CPU, TCP) implementation of `Collective`.
//
// CreateGlooCollective rendezvouses one rank of one job attempt with its peers through a
// `KeyValueStore` (every rank uses the same `key_prefix`, unique per job attempt, e.g.
// "<job>/<generation>/gloo/"), connects a full TCP mesh and returns a `Collective` whose operations
// run on `comm_threads` communication threads.
//
// Ordering and concurrency: gloo calls block, so operations are queued in issue order and handed
// round-robin to the communication threads; operation i runs on thread i % comm_threads with a
// gloo tag derived from i. Every rank must issue the same sequence of operations (same kinds,
// sizes, roots and dtypes), so the tags match across ranks. With comm_threads > 1 up to
// comm_threads operations are in flight at once (e.g. several bucket all-reduces), and they may
// FINISH out of issue order; callers that need a result wait on its Work. With comm_threads == 1
// operations run strictly one after another.
//
// Reductions: float32 sum/avg/max; bfloat16 (stored as uint16) sum/avg/max, with the sum computed
// in float per step and rounded to nearest even (see common/bf16.h); uint8 sum (wrapping mod 256)
// and max (kAvg on uint8 is INVALID_ARGUMENT). kAvg = sum, then divide by world_size on each
// rank.
// ReduceScatter is an all-reduce of the whole input into a scratch buffer followed by a copy of
// this rank's slice: it moves world_size x the bytes of a true reduce-scatter and allocates
// in.bytes() of scratch per call — fine for the drift check, not for hot paths.
//
// Lifecycle of the Collective (one per rank per job attempt):
//
//   CreateGlooCollective ──rendezvous ok──> LIVE ──op fails (timeout, peer gone, gloo bug)──> DEAD
//                        └─rendezvous fails─> error returned       └──Abort(reason)──────────> DEAD
//
//   In DEAD every queued and later operation fails at once with the first error (ABORTED(reason)
//   after Abort). An operation already inside gloo when Abort is called is NOT interrupted (this
//   gloo version has no way to cancel a blocked call or close a context from outside): it ends by
//   its own timeout or when the peers' sockets close, and its Work then reports ABORTED(reason).
//   The destructor aborts (ABORTED "collective destroyed"), then joins the threads, so it may
//   block up to the longest in-flight operation's timeout.
//
// Process safety: after a peer failure gloo may call std::terminate from its own I/O thread,
// which no caller can catch; run ranks in a supervised child process (see the worker daemon).
//
// Thread-safety: every method of the returned Collective may be called from any thread.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_COLLECTIVE_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_COLLECTIVE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

struct GlooOptions {
  // Address of the interface gloo binds its TCP listener to; peers connect to it. Loopback for
  // single-host jobs and tests; the worker's cluster-facing address otherwise.
  std::string hostname = "127.0.0.1";
  // How long rendezvous (every store wait and the TCP mesh connection) may take before
  // CreateGlooCollective fails with DEADLINE_EXCEEDED.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // Timeout of each operation whose CollectiveOptions::timeout is zero.
  absl::Duration collective_timeout = absl::Seconds(60);
  // Communication threads = how many operations may be in flight at once (>= 1).
  int comm_threads = 2;
  // Clock measuring Work::Duration. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
  // Told where the rendezvous is (liveness reports): see RendezvousProgress. Empty = nothing.
  RendezvousProgress on_progress;
};

// Rendezvouses rank `rank` of `world_size` under `key_prefix` in `store` and returns a live gloo
// Collective. A TCP failure that names a peer's address (connect, and later a peer closing or
// resetting its connection) is reported as "could not connect to rank R at HOST:PORT: ..." /
// "peer rank R at HOST:PORT: ..." with the real port (gloo_peers.h) and the peer in the
// status's RankFailure (common/rank_failure.h; gloo_status.h says the kinds: a key that never
// appeared in the store is PEER_TIMED_OUT). (backend_name() "gloo", memory_kind() kHost).
// Side effect: the process ignores SIGPIPE from then on (gloo writes to sockets with writev(): a
// peer that closed its end would otherwise kill the process instead of failing the operation).
// Errors: INVALID_ARGUMENT (rank/world_size/comm_threads/timeouts out of range, empty prefix,
// naming the field), DEADLINE_EXCEEDED (a peer did not show up within rendezvous_timeout; the
// message names the missing key), UNAVAILABLE (the store or a TCP connection failed),
// INTERNAL (gloo invariant violated).
absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& key_prefix, int rank, int world_size,
    const GlooOptions& opts = {});

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_COLLECTIVE_H_
