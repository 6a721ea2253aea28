#include "client/arg_parser.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/did_you_mean.h"

namespace ringleader {
namespace {

const FlagSpec* FindFlag(const std::string& name, const std::vector<FlagSpec>& a,
                         const std::vector<FlagSpec>& b) {
  for (const auto* list : {&a, &b}) {
    for (const FlagSpec& flag : *list) {
      if (flag.name == name) return &flag;
    }
  }
  return nullptr;
}

const FlagSpec* FindShortFlag(char short_name, const std::vector<FlagSpec>& a,
                              const std::vector<FlagSpec>& b) {
  for (const auto* list : {&a, &b}) {
    for (const FlagSpec& flag : *list) {
      if (flag.short_name != '\0' && flag.short_name == short_name) return &flag;
    }
  }
  return nullptr;
}

std::vector<std::string> FlagNames(const std::vector<FlagSpec>& a, const std::vector<FlagSpec>& b) {
  std::vector<std::string> names;
  for (const auto* list : {&a, &b}) {
    for (const FlagSpec& flag : *list) names.push_back(flag.name);
  }
  return names;
}

std::string FlagLines(const std::vector<FlagSpec>& flags) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const FlagSpec& flag : flags) {
    left.push_back(absl::StrCat(
        flag.short_name == '\0' ? "" : absl::StrCat("-", std::string(1, flag.short_name), ", "),
        "--", flag.name, flag.value_name.empty() ? "" : " " + flag.value_name));
    width = std::max(width, left.back().size());
  }
  std::string text;
  for (size_t i = 0; i < flags.size(); ++i) {
    absl::StrAppend(
        &text, absl::StrFormat("  %-*s  %s%s\n", static_cast<int>(width), left[i], flags[i].help,
                               flags[i].repeated ? " (repeatable)" : ""));
  }
  return text;
}

}  // namespace

std::string CommandLine::Value(const std::string& flag, const std::string& fallback) const {
  auto it = flags.find(flag);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const std::vector<FlagSpec>& global_flags,
                                             const std::vector<CommandSpec>& commands) {
  CommandLine line;
  const CommandSpec* command = nullptr;
  const std::vector<FlagSpec> no_flags;
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const std::string where = command == nullptr ? "" : absl::StrCat(" for '", command->name, "'");
    if (!flags_ended && arg == "--") {
      flags_ended = true;
      continue;
    }
    if (!flags_ended && (arg == "-h" || arg == "--help")) {
      line.help = true;
      continue;
    }
    if (!flags_ended && absl::StartsWith(arg, "-") && arg.size() > 1) {
      const std::vector<FlagSpec>& own = command == nullptr ? no_flags : command->flags;
      const FlagSpec* flag = nullptr;
      // The value written inside `arg` ("--name=value", "-nvalue"), if any.
      std::optional<std::string> inline_value;
      if (!absl::StartsWith(arg, "--")) {
        flag = FindShortFlag(arg[1], own, global_flags);
        if (flag == nullptr || (flag->value_name.empty() && arg.size() > 2)) {
          return absl::InvalidArgumentError(
              absl::StrCat("unknown flag '", arg, "'", where, "; flags are written --name"));
        }
        if (arg.size() > 2) inline_value = arg.substr(2);
      } else {
        const size_t equals = arg.find('=');
        const std::string name =
            arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
        flag = FindFlag(name, own, global_flags);
        if (flag == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "unknown flag --", name, where, DidYouMean(name, FlagNames(own, global_flags))));
        }
        if (equals != std::string::npos) inline_value = arg.substr(equals + 1);
      }
      const std::string& name = flag->name;
      std::string value;
      if (flag->value_name.empty()) {
        if (inline_value.has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", name, " takes no value; write just --", name));
        }
      } else if (inline_value.has_value()) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value: --", name, " ", flag->value_name));
      }
      std::vector<std::string>& values = line.flags[name];
      if (!values.empty() && !flag->repeated) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " given more than once; give it once"));
      }
      values.push_back(value);
      continue;
    }
    if (command == nullptr) {
      std::vector<std::string> names;
      for (const CommandSpec& candidate : commands) {
        if (candidate.name == arg) command = &candidate;
        names.push_back(candidate.name);
      }
      if (command == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown command '", arg, "'", DidYouMean(arg, names)));
      }
      line.command = command->name;
      continue;
    }
    line.arguments.push_back(arg);
  }
  if (command != nullptr && !line.help) {
    const size_t count = line.arguments.size();
    if (count < command->min_arguments || count > command->max_arguments) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", command->name, "' takes ",
          command->arguments.empty() ? "no arguments" : command->arguments, ", got ",
          count == 0 ? "none" : absl::StrCat(count, " argument", count == 1 ? "" : "s")));
    }
  }
  return line;
}

std::string ProgramUsage(const std::string& program, const std::string& summary,
                         const std::vector<FlagSpec>& global_flags,
                         const std::vector<CommandSpec>& commands) {
  std::string text =
      absl::StrCat("usage: ", program, " [global flags] <command> [flags] [args]\n\n", summary,
                   "\n\ncommands:\n");
  size_t width = 0;
  for (const CommandSpec& command : commands) width = std::max(width, command.name.size());
  for (const CommandSpec& command : commands) {
    absl::StrAppend(&text, absl::StrFormat("  %-*s  %s\n", static_cast<int>(width), command.name,
                                           command.summary));
  }
  std::vector<FlagSpec> shown = global_flags;
  shown.push_back(
      {"help", "",
       absl::StrCat("this text; '", program, " <command> --help' describes a command")});
  absl::StrAppend(&text, "\nglobal flags:\n", FlagLines(shown));
  return text;
}

std::string CommandUsage(const std::string& program, const CommandSpec& command,
                         const std::vector<FlagSpec>& global_flags) {
  std::string text = absl::StrCat(
      "usage: ", program, " ", command.name, command.flags.empty() ? "" : " [flags]",
      command.arguments.empty() ? "" : " " + command.arguments, "\n\n", command.summary, "\n");
  if (!command.description.empty()) absl::StrAppend(&text, "\n", command.description, "\n");
  if (!command.flags.empty()) absl::StrAppend(&text, "\nflags:\n", FlagLines(command.flags));
  absl::StrAppend(&text, "\nglobal flags:\n", FlagLines(global_flags));
  return text;
}

}  // namespace ringleader
