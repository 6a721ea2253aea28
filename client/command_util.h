// Helpers shared by the command implementations (not part of the client's API).
#ifndef RINGLEADER_CLIENT_COMMAND_UTIL_H_
#define RINGLEADER_CLIENT_COMMAND_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "client/commands.h"

namespace ringleader {

// Prints "error: <what>: <message> [CODE]" (plus a hint when the coordinator is unreachable)
// to env.err and returns the exit code for `status`: kExitUsage for INVALID_ARGUMENT,
// kExitFailure otherwise.
int ReportError(const absl::Status& status, const std::string& what, const CommandEnvironment& env);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_COMMAND_UTIL_H_
