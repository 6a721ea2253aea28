#include "client/command_util.h"

#include "client/format.h"

namespace ringleader {

int ReportError(const absl::Status& status, const std::string& what,
                const CommandEnvironment& env) {
  *env.err << "error: " << what << ": " << FormatStatus(status) << "\n";
  if (status.code() == absl::StatusCode::kUnavailable) {
    *env.err << "hint: is the coordinator running at " << env.coordinator_address
             << "? Point at another one with --coordinator HOST:PORT\n";
  }
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace ringleader
