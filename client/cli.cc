#include "client/cli.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/arg_parser.h"

namespace ringleader {
namespace {

constexpr char kProgram[] = "ringleader";

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"coordinator", "ADDR",
       absl::StrCat("coordinator address host:port (default ", kDefaultCoordinator, ")")},
      {"timeout", "DURATION", "deadline of each call, e.g. 10s or 500ms (default 10s)"},
  };
  return *flags;
}

// Named submit flags and the spec fields they set.
const std::vector<std::pair<std::string, std::string>>& SubmitFieldFlags() {
  static const auto* flags = new std::vector<std::pair<std::string, std::string>>{
      {"name", "name"},           {"world_size", "world_size"}, {"backend", "backend"},
      {"epochs", "epochs"},       {"batch_size", "batch_size"}, {"lr", "optimizer.learning_rate"},
      {"max_steps", "max_steps"},
  };
  return *flags;
}

const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"submit",
       "[SPEC.yaml]",
       0,
       1,
       "submit a training job; prints its id and fingerprint",
       "The spec is the YAML file (keys are the JobSpec proto fields), then the named flags,\n"
       "then each --set in order. world_size is 2 unless given; every other unset field takes\n"
       "its documented default. The spec is validated before anything is sent.",
       {{"name", "S", "job name"},
        {"world_size", "N", "number of ranks (default 2)"},
        {"backend", "S", "gloo (CPU) or nccl (GPU)"},
        {"epochs", "N", "training epochs"},
        {"batch_size", "N", "per-rank batch size"},
        {"lr", "X", "learning rate (optimizer.learning_rate)"},
        {"max_steps", "N", "stop after N optimizer steps (0 = all epochs)"},
        {"set", "KEY.PATH=VALUE", "set any spec field, e.g. --set sync.bucket_cap_mb=4",
         /*repeated=*/true},
        {"watch", "", "follow the job after submitting it (as 'ringleader watch')"}}},
      {"status",
       "JOB",
       1,
       1,
       "show a job: state, transitions, per-rank progress, epoch accuracies",
       "",
       {}},
      {"watch",
       "JOB",
       1,
       1,
       "follow a job until it ends, then judge the run",
       "Prints state changes and epoch accuracies as they happen, with a progress line.\n"
       "At the end: state, final accuracy, whether the synced gradient norms agree across\n"
       "ranks at the last common step (relative difference <= 1e-6) and the max parameter\n"
       "drift (exactly 0 expected). Exit 0 only if the job SUCCEEDED and both checks pass.",
       {}},
      {"list", "", 0, 0, "list jobs", "", {}},
      {"workers", "", 0, 0, "list registered workers", "", {}},
      {"cancel",
       "JOB",
       1,
       1,
       "cancel a queued or running job",
       "",
       {{"reason", "S", "reason recorded with the cancellation"}}},
  };
  return *commands;
}

constexpr char kSummary[] = "ringleader: data-parallel training jobs on a coordinator.";

// Accepts "10s", "500ms", "1m" or a plain number of seconds.
bool ParseTimeout(const std::string& text, absl::Duration* timeout) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    *timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, timeout)) {
    return false;
  }
  return *timeout > absl::ZeroDuration() && *timeout < absl::InfiniteDuration();
}

// The usage to show after a command-line error: the command's when one is named.
std::string UsageFor(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    for (const CommandSpec& command : Commands()) {
      if (command.name == arg) return CliUsage(arg);
    }
  }
  return CliUsage();
}

}  // namespace

std::string CliUsage(const std::string& command) {
  for (const CommandSpec& spec : Commands()) {
    if (spec.name == command) return CommandUsage(kProgram, spec, GlobalFlags());
  }
  return ProgramUsage(kProgram, kSummary, GlobalFlags(), Commands());
}

int RunCli(const std::vector<std::string>& args, const CommandEnvironment& base_env,
           const JobClientFactory& connect) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, GlobalFlags(), Commands());
  if (!line.ok()) {
    *base_env.err << "error: " << line.status().message() << "\n\n" << UsageFor(args);
    return kExitUsage;
  }
  if (line->help) {
    *base_env.out << CliUsage(line->command);
    return kExitOk;
  }
  if (line->command.empty()) {
    *base_env.err << "error: no command given\n\n" << CliUsage();
    return kExitUsage;
  }
  absl::Duration timeout = absl::Seconds(10);
  if (line->Has("timeout") && !ParseTimeout(line->Value("timeout"), &timeout)) {
    *base_env.err << "error: --timeout: expected a positive duration like 10s or 500ms, got '"
                  << line->Value("timeout") << "'\n";
    return kExitUsage;
  }
  CommandEnvironment env = base_env;
  env.coordinator_address = line->Value("coordinator", kDefaultCoordinator);

  // Everything the command needs is checked before connecting.
  SubmitOptions submit;
  if (line->command == "submit") {
    if (!line->arguments.empty()) submit.spec_path = line->arguments[0];
    for (const auto& [flag, path] : SubmitFieldFlags()) {
      if (line->Has(flag)) submit.overrides.push_back({"--" + flag, path, line->Value(flag)});
    }
    auto sets = line->flags.find("set");
    if (sets != line->flags.end()) {
      for (const std::string& assignment : sets->second) {
        const size_t equals = assignment.find('=');
        if (equals == std::string::npos || equals == 0) {
          *env.err << "error: --set: expected KEY.PATH=VALUE (e.g. optimizer.momentum=0.8), got '"
                   << assignment << "'\n";
          return kExitUsage;
        }
        submit.overrides.push_back(
            {"--set " + assignment, assignment.substr(0, equals), assignment.substr(equals + 1)});
      }
    }
    submit.watch = line->Has("watch");
  }

  std::unique_ptr<JobClient> client = connect(env.coordinator_address, timeout);
  const std::string& command = line->command;
  if (command == "submit") return RunSubmit(submit, *client, env);
  if (command == "status") return RunStatus(line->arguments[0], *client, env);
  if (command == "watch") return RunWatch(line->arguments[0], WatchOptions(), *client, env);
  if (command == "list") return RunList(*client, env);
  if (command == "workers") return RunWorkers(*client, env);
  if (command == "cancel") {
    return RunCancel(line->arguments[0], line->Value("reason", "cancelled from the command line"),
                     *client, env);
  }
  // Commands() and this dispatch disagree: a programmer bug.
  *env.err << "internal error: command '" << command << "' has no implementation\n";
  return kExitFailure;
}

}  // namespace ringleader
