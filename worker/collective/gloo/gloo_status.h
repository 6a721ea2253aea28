// Converts gloo's exceptions into absl::Status at the call site.
//
//   absl::Status s = RL_GLOO_CALL(gloo::allreduce(opts));
//
// evaluates the expression; if it throws, the status names the expression text and gloo's
// message, with the code chosen by the exception kind:
//   gloo::IoException whose message speaks of a timeout  -> DEADLINE_EXCEEDED
//   other gloo::IoException (peer gone, socket error)     -> UNAVAILABLE
//   gloo::EnforceNotMet, other gloo/std exceptions        -> INTERNAL (invariant broken: a bug)
// Callers prefix the operation's context (rank, op, bucket, element count).
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_

#include <functional>

#include "absl/status/status.h"

namespace ringleader {
namespace gloo_internal {

// Runs `fn`, converting any exception it throws as described in the file comment.
// `expression` is the source text quoted in the message.
absl::Status RunGlooCall(const std::function<void()>& fn, const char* expression);

}  // namespace gloo_internal
}  // namespace ringleader

// Variadic so that expressions with top-level commas (template arguments) pass through whole.
#define RL_GLOO_CALL(...) \
  ::ringleader::gloo_internal::RunGlooCall([&]() { __VA_ARGS__; }, #__VA_ARGS__)

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_STATUS_H_
