#include "worker/collective/gloo/gloo_status.h"

#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace ringleader {
namespace gloo_internal {

absl::Status RunGlooCall(const std::function<void()>& fn, const char* expression,
                         std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  try {
    fn();
    return absl::OkStatus();
  } catch (const gloo::IoException& e) {
    const std::string message = absl::StrCat(expression, " failed: ", e.what());
    const bool ran_out = timeout > std::chrono::milliseconds::zero() &&
                         std::chrono::steady_clock::now() - start >= timeout;
    return ran_out ? WithFailureKind(absl::DeadlineExceededError(message),
                                     v1::RankFailure::PEER_TIMED_OUT)
                   : WithFailureKind(absl::UnavailableError(message),
                                     v1::RankFailure::PEER_CLOSED);
  } catch (const gloo::EnforceNotMet& e) {
    return WithFailureKind(
        absl::InternalError(absl::StrCat(expression, " failed a gloo invariant check: ", e.what())),
        v1::RankFailure::INTERNAL);
  } catch (const std::bad_alloc& e) {
    return WithFailureKind(
        absl::ResourceExhaustedError(absl::StrCat(expression, " ran out of memory: ", e.what())),
        v1::RankFailure::OUT_OF_MEMORY);
  } catch (const std::exception& e) {
    return WithFailureKind(absl::InternalError(absl::StrCat(expression, " threw: ", e.what())),
                           v1::RankFailure::INTERNAL);
  } catch (...) {
    return WithFailureKind(
        absl::InternalError(absl::StrCat(expression, " threw a non-standard exception")),
        v1::RankFailure::INTERNAL);
  }
}

}  // namespace gloo_internal
}  // namespace ringleader
