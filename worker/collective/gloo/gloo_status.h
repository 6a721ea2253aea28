// Converts gloo's exceptions into absl::Status at the call site, with the failure's kind
// (common/rank_failure.h) decided by the exception's type and the call's own timeout:
//
//   absl::Status s = RL_GLOO_CALL_WITHIN(timeout, gloo::allreduce(opts));
//
// evaluates the expression; if it throws, the status names the expression text and gloo's
// message, with code and kind:
//   gloo::IoException once the call ran for `timeout`      -> DEADLINE_EXCEEDED, PEER_TIMED_OUT
//     (gloo has no timeout exception of its own: a call that throws an I/O error after its
//     whole timeout is one that waited that long for a peer)
//   other gloo::IoException (peer gone, socket error)      -> UNAVAILABLE, PEER_CLOSED
//   std::bad_alloc                                         -> RESOURCE_EXHAUSTED, OUT_OF_MEMORY
//   gloo::EnforceNotMet, other gloo/std exceptions         -> INTERNAL, INTERNAL (a bug)
// RL_GLOO_CALL(expr) is the same for a call without a timeout of its own (its I/O errors are
// PEER_CLOSED). Callers prefix the operation's context (rank, op, bucket, element count) and
// add the peer (gloo_peers.h).
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_

#include <chrono>
#include <functional>

#include "absl/status/status.h"

namespace ringleader {
namespace gloo_internal {

// Runs `fn`, converting any exception it throws as described in the file comment.
// `expression` is the source text quoted in the message; `timeout` the one the call was given
// (zero = none). Thread-safe: it keeps no state.
absl::Status RunGlooCall(const std::function<void()>& fn, const char* expression,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

}  // namespace gloo_internal
}  // namespace ringleader

// Variadic so that expressions with top-level commas (template arguments) pass through whole.
#define RL_GLOO_CALL(...) \
  ::ringleader::gloo_internal::RunGlooCall([&]() { __VA_ARGS__; }, #__VA_ARGS__)
#define RL_GLOO_CALL_WITHIN(timeout, ...) \
  ::ringleader::gloo_internal::RunGlooCall([&]() { __VA_ARGS__; }, #__VA_ARGS__, (timeout))

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_
