#include "worker/collective/gloo/gloo_status.h"

#include <exception>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace ringleader {
namespace gloo_internal {
namespace {

// gloo has no distinct timeout exception; its timeouts read "Timed out waiting ...",
// "Connect timeout ..." or "Read timeout ...".
bool MentionsTimeout(const std::string& message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

}  // namespace

absl::Status RunGlooCall(const std::function<void()>& fn, const char* expression) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const gloo::IoException& e) {
    const std::string message = absl::StrCat(expression, " failed: ", e.what());
    return MentionsTimeout(e.what()) ? absl::DeadlineExceededError(message)
                                     : absl::UnavailableError(message);
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(
        absl::StrCat(expression, " failed a gloo invariant check: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(expression, " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(expression, " threw a non-standard exception"));
  }
}

}  // namespace gloo_internal
}  // namespace ringleader
