// A small command-line parser for "program [GLOBAL FLAGS] COMMAND [FLAGS] [ARGS]".
//
// Flags are "--name=value", "--name value" or "--switch"; a flag with a short name also takes
// "-n value" (or "-nvalue"); "--" ends the flags; "-h"/"--help" asks for help (global or per
// command). Global flags are accepted before and after the
// command. Each command declares its flags and positional arguments, which gives every command
// its own --help text. No global state. Thread-compatible.
#ifndef RINGLEADER_CLIENT_ARG_PARSER_H_
#define RINGLEADER_CLIENT_ARG_PARSER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringleader {

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // shown in help ("N", "ADDR"); empty for a switch (takes no value)
  std::string help;
  bool repeated = false;  // may be given more than once (values kept in order)
  char short_name = '\0';  // e.g. 'o' for "-o FILE"; '\0' for none ('h' is taken by help)
};

struct CommandSpec {
  std::string name;
  std::string arguments;  // positional arguments as shown in usage, e.g. "JOB" or "[SPEC.yaml]"
  size_t min_arguments = 0;
  size_t max_arguments = 0;
  std::string summary;      // one line, shown in the program's usage
  std::string description;  // more text for the command's --help (may be empty)
  std::vector<FlagSpec> flags;
};

struct CommandLine {
  std::string command;  // empty when none was given
  std::vector<std::string> arguments;
  // Keyed by the long name, also when given by the short one; a switch maps to {""}.
  std::map<std::string, std::vector<std::string>> flags;
  bool help = false;

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  // The last value of `flag`, or `fallback` when absent.
  std::string Value(const std::string& flag, const std::string& fallback = "") const;
};

// Parses `args` (argv without the program name). Errors: INVALID_ARGUMENT naming the unknown
// command or flag (with a "did you mean" suggestion), a missing flag value, a non-repeated flag
// given twice, a value given to a switch, or a wrong number of arguments. With help requested,
// the argument count is not checked.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::vector<FlagSpec>& global_flags,
                                             const std::vector<CommandSpec>& commands);

// "usage: ringleader [global flags] <command> ...", the commands and the global flags.
std::string ProgramUsage(const std::string& program, const std::string& summary,
                         const std::vector<FlagSpec>& global_flags,
                         const std::vector<CommandSpec>& commands);

// Usage of one command: synopsis, description, its flags and the global flags.
std::string CommandUsage(const std::string& program, const CommandSpec& command,
                         const std::vector<FlagSpec>& global_flags);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_ARG_PARSER_H_
