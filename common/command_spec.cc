#include "common/command_spec.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

bool IsEnvName(absl::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

const std::vector<std::string>& ReservedCommandEnv() {
  static const auto* const kNames = new std::vector<std::string>{
      "RANK",        "WORLD_SIZE",      "LOCAL_RANK",
      "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
      "ROLE_RANK",   "ROLE_WORLD_SIZE", "ROLE_NAME",
      "MASTER_ADDR", "MASTER_PORT",     "TORCHELASTIC_RESTART_COUNT",
      "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "RINGLEADER_COORDINATOR",
      "RINGLEADER_JOB", "RINGLEADER_GENERATION", "RINGLEADER_RANK",
      "RINGLEADER_CHECKPOINT_DIR", "RINGLEADER_SNAPSHOT_DIR",
      "RINGLEADER_DRIFT_INTERVAL_STEPS"};
  return *kNames;
}

bool IsReservedEnvName(absl::string_view name) {
  if (absl::StartsWith(name, "RINGLEADER_") || absl::StartsWith(name, "TORCHELASTIC_")) {
    return true;
  }
  const std::vector<std::string>& reserved = ReservedCommandEnv();
  return std::find(reserved.begin(), reserved.end(), name) != reserved.end();
}

absl::Status ValidateCommandSpec(const v1::JobSpec& spec) {
  if (spec.command().empty()) {
    if (!spec.env().empty()) {
      return Invalid("env: only a command job takes env; set command (the program each rank "
                     "runs) or drop env");
    }
    if (!spec.workdir().empty()) {
      return Invalid("workdir: only a command job takes workdir; set command or drop workdir");
    }
    return absl::OkStatus();
  }
  if (static_cast<size_t>(spec.command_size()) > kMaxCommandArgs) {
    return Invalid(absl::StrCat("command: at most ", kMaxCommandArgs, " arguments, got ",
                                spec.command_size()));
  }
  size_t bytes = 0;
  for (int i = 0; i < spec.command_size(); ++i) {
    const std::string& arg = spec.command(i);
    if (absl::StrContains(arg, '\0')) {
      return Invalid(absl::StrCat("command[", i, "]: must not contain a NUL character"));
    }
    bytes += arg.size() + 1;
  }
  if (spec.command(0).empty()) {
    return Invalid("command[0]: the program to run must not be empty (e.g. /usr/bin/python3)");
  }
  if (static_cast<size_t>(spec.env_size()) > kMaxEnvEntries) {
    return Invalid(
        absl::StrCat("env: at most ", kMaxEnvEntries, " variables, got ", spec.env_size()));
  }
  for (const auto& [name, value] : spec.env()) {
    if (!IsEnvName(name)) {
      return Invalid(absl::StrCat("env.", name,
                                  ": not a variable name (letters, digits and '_', not "
                                  "starting with a digit)"));
    }
    if (IsReservedEnvName(name)) {
      return Invalid(absl::StrCat(
          "env.", name,
          ": set by ringleader for every rank (torchrun's variables, RINGLEADER_*, "
          "TORCHELASTIC_*); remove it from env"));
    }
    if (absl::StrContains(value, '\0')) {
      return Invalid(absl::StrCat("env.", name, ": the value must not contain a NUL character"));
    }
    bytes += name.size() + value.size() + 2;
  }
  if (bytes > kMaxCommandBytes) {
    return Invalid(absl::StrCat("command, env: at most ", kMaxCommandBytes,
                                " bytes together, got ", bytes));
  }
  if (!spec.workdir().empty() && spec.workdir()[0] != '/') {
    return Invalid(absl::StrCat("workdir: must be an absolute path, got '", spec.workdir(),
                                "' (ranks run on other hosts with other working directories)"));
  }
  if (absl::StrContains(spec.workdir(), '\0')) {
    return Invalid("workdir: must not contain a NUL character");
  }
  return absl::OkStatus();
}

}  // namespace ringleader
