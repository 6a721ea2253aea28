// Command jobs (`JobSpec.command`): the environment contract between ringleader and a user's
// program (a PyTorch script written for torchrun), and the checks of the spec's command, env and
// workdir fields.
//
// A command job's rank runs argv `command` in `workdir` with the worker's environment, the job's
// `env`, and the variables ringleader sets (ReservedCommandEnv: torchrun's set plus
// RINGLEADER_*). The job's env may not set those: a script would then disagree with the
// coordinator about its own rank.
#ifndef RINGLEADER_COMMON_COMMAND_SPEC_H_
#define RINGLEADER_COMMON_COMMAND_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Limits on a command job's fields.
inline constexpr size_t kMaxCommandArgs = 1024;
inline constexpr size_t kMaxCommandBytes = 128 * 1024;  // argv and env together
inline constexpr size_t kMaxEnvEntries = 256;

// The variables a command job's ranks get from ringleader (every rank, every attempt).
const std::vector<std::string>& ReservedCommandEnv();

// True for a variable of ReservedCommandEnv() and for every RINGLEADER_* / TORCHELASTIC_* name.
bool IsReservedEnvName(absl::string_view name);

// Checks command, env and workdir (only the spec's text: whether the program and directory
// exist is checked on the worker that runs the rank). INVALID_ARGUMENT naming the field
// ("command[0]", "env.RANK", "workdir") and the fix; OK for a spec without a command that sets
// neither env nor workdir.
absl::Status ValidateCommandSpec(const v1::JobSpec& spec);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_COMMAND_SPEC_H_
