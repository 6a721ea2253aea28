// Helpers shared by the command implementations (not part of the client's API).
#ifndef RINGLEADER_CLIENT_COMMAND_UTIL_H_
#define RINGLEADER_CLIENT_COMMAND_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/commands.h"
#include "google/protobuf/message.h"

namespace ringleader {

// Prints "error: <what>: <message> [CODE]" (plus a hint when the coordinator is unreachable)
// to env.err and returns the exit code for `status`: kExitUsage for INVALID_ARGUMENT,
// kExitUnreachable for UNAVAILABLE and DEADLINE_EXCEEDED, kExitFailure otherwise.
int ReportError(const absl::Status& status, const std::string& what, const CommandEnvironment& env);

// Writes `bytes` to a new temporary file next to `path` (fsync'ed), then renames it to `path`:
// readers see the old file or the whole new one. Returns 0 or the errno of the first failure;
// the temporary file is removed on failure and the file at `path` is untouched.
int WriteFileAtomically(const std::string& path, const std::string& bytes);

// Prints `message` in protobuf's JSON mapping (proto field names; indented, or on one line for
// streams of messages: JSON Lines) and a newline to env.out; kExitOk, or kExitFailure when it
// cannot be converted.
int PrintJson(const google::protobuf::Message& message, const CommandEnvironment& env,
              bool one_line = false);

// {"key": "value", ...} as a google.protobuf.Struct (its JSON mapping, one line) on env.out:
// what `export` and `plot` print under --output json (no hand-written JSON).
int PrintJsonFields(const std::vector<std::pair<std::string, std::string>>& fields,
                    const CommandEnvironment& env);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_COMMAND_UTIL_H_
