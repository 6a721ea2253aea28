#include "client/cli.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/arg_parser.h"
#include "common/coordinator_addresses.h"

namespace ringleader {
namespace {

constexpr char kProgram[] = "ringleader";

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"coordinator", "ADDR",
       absl::StrCat("coordinator address host:port, or a comma-separated list of them (a leader "
                    "and its standbys) (default $RINGLEADER_COORDINATOR, else ",
                    kDefaultCoordinator, ")")},
      {"timeout", "DURATION", "deadline of each call, e.g. 10s or 500ms (default 10s)"},
      {"output", "text|json",
       "answers as text (default) or JSON for scripts (watch, logs: one message a line)"},
      {"json", "",
       "the same as --output json; also for metrics, plot, export, consolidate (-o is their "
       "file)"},
      {"tls_dir", "DIR",
       "mutual TLS: DIR/ca.pem, DIR/client.pem, DIR/client.key (default $RINGLEADER_TLS_DIR)"},
      {"insecure", "", "plaintext gRPC (a coordinator started with --insecure)"},
      {"token_file", "FILE",
       "the bearer token of a coordinator with --tokens_file (default $RINGLEADER_TOKEN)"},
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
      {"plan",
       "[SPEC.yaml]",
       0,
       1,
       "print the predicted memory per rank of every strategy for a spec (no coordinator)",
       "Reads the spec as 'submit' does (the YAML file, then --world_size and each --set in\n"
       "order; world_size 2 unless given) and validates it, then prints per strategy (ddp,\n"
       "zero1, zero2, fsdp) the bytes one rank holds: parameters, gradients, optimizer state\n"
       "(SGD momentum), communication buffers, their total, the ratio to ddp and whether\n"
       "ringleader runs it with the spec's settings. The formulas are in\n"
       "plan/memory_plan.h. Works offline: nothing is sent.",
       {{"world_size", "N", "number of ranks (default: the spec's, or 2)"},
        {"set", "KEY.PATH=VALUE", "set any spec field, e.g. --set sync.comm_dtype=bf16",
         /*repeated=*/true}}},
      {"status",
       "JOB",
       1,
       1,
       "show a job: state, verdict, transitions, per-rank progress, alarms, stragglers",
       "The verdict line is the coordinator's judgement so far (PASS, WARN, FAIL or not judged\n"
       "yet), the steps it judged and the train samples/s. Every alarm gets one line; the\n"
       "stragglers table shows each rank's median step/compute/comm times and the suspected\n"
       "cause (compute or communication) of a flagged rank.",
       {}},
      {"watch",
       "JOB",
       1,
       1,
       "follow a job until it ends, then show the coordinator's verdict",
       "Prints state changes, epoch accuracies and the coordinator's alarms as they happen,\n"
       "with a progress line. At the end: state, final accuracy, the first bad step and the\n"
       "last judged step with each rank's loss, local/synced grad norm and drift, every alarm,\n"
       "and the result with the train samples/s. The coordinator judges every step; watch\n"
       "only shows its verdict. Exit 0 only if the job SUCCEEDED and the verdict is PASS or\n"
       "WARN (warnings are listed; they do not fail the watch).",
       {}},
      {"list",
       "",
       0,
       0,
       "list jobs",
       "",
       {{"state", "S",
         "only jobs in state S (queued, rendezvous, running, succeeded, failed, cancelled); "
         "repeat for several",
         /*repeated=*/true},
        {"limit", "N", "at most N jobs, the most recently submitted"},
        {"archived", "",
         "also the finished jobs the coordinator archived (beyond its --jobs_kept), marked "
         "'(archived)'"}}},
      {"workers", "", 0, 0, "list registered workers (quarantined ones with the reason)", "", {}},
      {"doctor",
       "[WORKER...]",
       0,
       1024,
       "run a pre-flight check on workers and quarantine the bad ones",
       "Runs a short check as a job of its own on the named workers (none named: every idle\n"
       "worker that is not quarantined), ahead of the queue: an fp32 matmul on each (GFLOP/s)\n"
       "and, between each pair, a bandwidth and a latency exchange over gloo. A worker below\n"
       "--min_fraction of the median, or the worker common to the failing or slow pairs, is\n"
       "named with its figures and quarantined: never placed until `ringleader uncordon`.\n"
       "With 2 workers a bad pair cannot say which end is bad: nobody is quarantined. Exit 0\n"
       "when every worker passed, 1 otherwise.",
       {{"min_fraction", "F", "below this fraction of the median a worker is named (default 0.5)"},
        {"wait", "DURATION", "how long to wait for the check (default 30s, the coordinator's "
                             "longest wait)"}}},
      {"uncordon",
       "WORKER",
       1,
       1,
       "release a quarantined worker",
       "",
       {}},
      {"cancel",
       "JOB",
       1,
       1,
       "cancel a queued or running job",
       "",
       {{"reason", "S", "reason recorded with the cancellation"}}},
      {"debug",
       "JOB",
       1,
       1,
       "show where each rank is in its collectives and the first one they disagree on",
       "Hang forensics. Asks every rank of the job's running attempt for its ring of the last\n"
       "256 collectives (sequence number, kind, dtype, bytes, bucket, state, times) and prints\n"
       "the first collective some rank has not completed, which ranks never entered it (a\n"
       "rank that does not answer, e.g. one stopped or frozen, by the counts of its last\n"
       "report) and what each other rank is doing there, then each rank's latest entries.\n"
       "The report is kept as the job's hang report (the job page on the dashboard shows it).",
       {{"wait", "DURATION", "how long to wait for the ranks' rings (default 5s, at most 60s)"},
        {"entries", "N", "ring entries shown per rank (default 8; 0 = all)"}}},
      {"metrics",
       "JOB",
       1,
       1,
       "export a job's per-step, per-rank metrics as CSV or JSON",
       "One row per step and rank of the job's current attempt, ordered by step then rank,\n"
       "with the columns step, rank, loss, local_grad_norm (before the all-reduce),\n"
       "synced_grad_norm (after it), drift (max |W_r - W_0|; empty at steps without a drift\n"
       "check), step_ms, compute_ms, comm_ms and samples_per_second. The most recent steps are\n"
       "all there; older steps are decimated (kept every Nth step, N doubling as the job runs\n"
       "on), so the history stays bounded. JSON is one object with job_id, generation,\n"
       "full_resolution_steps, decimation_stride and the points (protobuf's JSON mapping:\n"
       "64-bit integers are strings). Numbers are printed so that they parse back exactly.",
       {{"format", "csv|json", "output format (default csv)"},
        {"output", "FILE", "write to FILE (atomically) instead of stdout; prints a summary",
         /*repeated=*/false, /*short_name=*/'o'}}},
      {"plot",
       "JOB",
       1,
       1,
       "draw a job's per-rank metrics as charts in an SVG or PNG file",
       "The figures 'metrics' exports, drawn: one panel per quantity (loss, synced vs local\n"
       "grad norm, drift, step time, samples/s) with one line per rank, axes with ticks and a\n"
       "legend, for the job's current attempt. The dashboard's job page draws the same charts\n"
       "live (/job/JOB on the coordinator's --http_listen address). -o FILE.svg writes the\n"
       "SVG; -o FILE.png converts it with rsvg-convert (Debian package librsvg2-bin). The file\n"
       "is replaced atomically.",
       {{"output", "FILE", "the .svg or .png file to write (required)", /*repeated=*/false,
         /*short_name=*/'o'}}},
      {"logs",
       "JOB",
       1,
       1,
       "print the ranks' output (stdout and stderr); --follow for new output",
       "The coordinator keeps the most recent output of each rank (1 MiB per rank and 8 MiB\n"
       "per job by default, in memory: a restarted coordinator has only what came after). With\n"
       "--rank R: that rank's raw output; otherwise every rank's, each line prefixed\n"
       "\"[rank R] \". Output no longer kept shows as \"[rank R: N bytes not kept]\". --follow\n"
       "prints new output as it arrives until the attempt is over; when the job restarts it\n"
       "goes on with the new attempt (\"--- generation G ---\") until the job is over (with\n"
       "--generation, only that attempt).",
       {{"rank", "R", "only rank R, its raw output"},
        {"tail", "N", "only the last N lines of each rank (then new ones, with --follow)"},
        {"follow", "", "keep printing new output until the job is over"},
        {"generation", "G", "the attempt to show (default: the latest)"}}},
      {"export",
       "JOB",
       1,
       1,
       "write a finished job's final weights as a safetensors file",
       "Reads the final checkpoint rank 0 wrote (<checkpoint_dir>/<job>/final.ckpt; run the\n"
       "command where that directory is readable) and writes its parameters and buffers with\n"
       "PyTorch's state_dict names and shapes (fc1.weight [out, in], fc1.bias, ...), without\n"
       "the optimizer's state: safetensors.torch.load_file / load_state_dict read it.",
       {{"output", "FILE", "the .safetensors file to write (required)", /*repeated=*/false,
         /*short_name=*/'o'}}},
      {"consolidate",
       "MANIFEST",
       1,
       1,
       "write a sharded checkpoint as one consolidated checkpoint file",
       "MANIFEST is the step-N.ckpt of a job with checkpoint_format: sharded; its shards\n"
       "(step-N.shard-R-of-W) are read from the same directory, each checked against the size\n"
       "and CRC-32 the manifest records, and every tensor is written whole, as in final.ckpt\n"
       "(model.init_from also reads a manifest itself). The file is replaced atomically. Runs\n"
       "offline where the checkpoint directory is readable: no coordinator is needed.",
       {{"output", "FILE", "the .ckpt file to write (required)", /*repeated=*/false,
         /*short_name=*/'o'}}},
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
  env.coordinator_address = line->Value(
      "coordinator",
      base_env.default_coordinator.empty() ? kDefaultCoordinator : base_env.default_coordinator);
  // -o/--output names the file of the commands that write one; elsewhere it is the format.
  bool writes_file = false;
  for (const CommandSpec& spec : Commands()) {
    if (spec.name != line->command) continue;
    for (const FlagSpec& flag : spec.flags) writes_file |= flag.name == "output";
  }
  const std::string output = writes_file ? "text" : line->Value("output", "text");
  if (output != "text" && output != "json") {
    *base_env.err << "error: --output: expected text or json, got '" << output << "'\n";
    return kExitUsage;
  }
  env.json = line->Has("json") || output == "json";

  // Everything the command needs is checked before connecting.
  SubmitOptions submit;
  if (line->command == "submit" || line->command == "plan") {
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
  // `plan` computes offline: no coordinator, no TLS.
  if (line->command == "plan") return RunPlan(submit, env);
  // `consolidate` reads and writes local files: no coordinator either.
  if (line->command == "consolidate") {
    if (line->Value("output").empty()) {
      *env.err << "error: consolidate: -o FILE (--output) is required\n";
      return kExitUsage;
    }
    return RunConsolidate(line->arguments[0], line->Value("output"), env);
  }
  MetricsOptions metrics;
  if (line->command == "metrics") {
    metrics.format = line->Value("format", env.json ? "json" : metrics.format);
    if (absl::Status valid = CheckMetricsOptions(metrics); !valid.ok()) {
      *env.err << "error: " << valid.message() << "\n";
      return kExitUsage;
    }
    if (line->Has("output") && line->Value("output").empty()) {
      *env.err << "error: --output: expected a file name\n";
      return kExitUsage;
    }
    metrics.output_path = line->Value("output");
  }

  LogsOptions logs;
  if (line->command == "logs") {
    uint32_t rank = 0;
    if (line->Has("rank")) {
      if (!absl::SimpleAtoi(line->Value("rank"), &rank)) {
        *env.err << "error: --rank: expected a rank number (0, 1, ...), got '"
                 << line->Value("rank") << "'\n";
        return kExitUsage;
      }
      logs.rank = rank;
    }
    if (line->Has("generation") &&
        (!absl::SimpleAtoi(line->Value("generation"), &logs.generation) ||
         logs.generation == 0)) {
      *env.err << "error: --generation: expected a generation number (1, 2, ...), got '"
               << line->Value("generation") << "'\n";
      return kExitUsage;
    }
    if (line->Has("tail") &&
        (!absl::SimpleAtoi(line->Value("tail"), &logs.tail) || logs.tail < 0)) {
      *env.err << "error: --tail: expected a number of lines (0 or more), got '"
               << line->Value("tail") << "'\n";
      return kExitUsage;
    }
    logs.follow = line->Has("follow");
  }

  ListOptions list;
  if (line->command == "list") {
    auto states = line->flags.find("state");
    if (states != line->flags.end()) {
      for (const std::string& name : states->second) {
        absl::StatusOr<v1::JobState> state = ParseJobStateName(name);
        if (!state.ok()) {
          *env.err << "error: " << state.status().message() << "\n";
          return kExitUsage;
        }
        list.states.push_back(*state);
      }
    }
    if (line->Has("limit") && (!absl::SimpleAtoi(line->Value("limit"), &list.limit) ||
                               list.limit == 0)) {
      *env.err << "error: --limit: expected a number of jobs (1 or more), got '"
               << line->Value("limit") << "'\n";
      return kExitUsage;
    }
    list.archived = line->Has("archived");
  }

  PlotOptions plot;
  if (line->command == "plot") {
    plot.output_path = line->Value("output");
    if (absl::Status valid = CheckPlotOptions(plot); !valid.ok()) {
      *env.err << "error: " << valid.message() << "\n";
      return valid.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
  }

  if (line->command == "export" && line->Value("output").empty()) {
    *env.err << "error: export: -o FILE (--output) is required\n";
    return kExitUsage;
  }

  if (absl::Status valid = ParseCoordinatorAddresses(env.coordinator_address).status();
      !valid.ok()) {
    *env.err << "error: --coordinator: " << valid.message() << "\n";
    return kExitUsage;
  }

  ConnectOptions connect_options;
  connect_options.address = env.coordinator_address;
  connect_options.call_timeout = timeout;
  connect_options.insecure = line->Has("insecure");
  connect_options.tls_dir = line->Value("tls_dir", env.default_tls_dir);
  if (connect_options.insecure && line->Has("tls_dir")) {
    *env.err << "error: --tls_dir and --insecure both given: choose TLS or plaintext\n";
    return kExitUsage;
  }
  if (connect_options.insecure) connect_options.tls_dir.clear();
  if (!connect_options.insecure && connect_options.tls_dir.empty()) {
    *env.err << "error: --tls_dir: the coordinator speaks TLS: give --tls_dir=DIR with ca.pem, "
                "client.pem and client.key (deploy/certs.sh DIR makes them; or set "
                "RINGLEADER_TLS_DIR), or --insecure for a coordinator started with --insecure\n";
    return kExitUsage;
  }
  connect_options.token = env.default_token;
  if (line->Has("token_file")) {
    if (!env.read_file) {
      *env.err << "error: --token_file: cannot read files here\n";
      return kExitUsage;
    }
    absl::StatusOr<std::string> token = env.read_file(line->Value("token_file"));
    if (!token.ok()) {
      *env.err << "error: --token_file: cannot read " << line->Value("token_file") << ": "
               << token.status().message() << "\n";
      return kExitUsage;
    }
    connect_options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (connect_options.token.empty()) {
      *env.err << "error: --token_file: " << line->Value("token_file") << " is empty\n";
      return kExitUsage;
    }
  }
  std::unique_ptr<JobClient> client = connect(connect_options);
  if (client == nullptr) return kExitUsage;  // the factory said why (unreadable TLS files)
  const std::string& command = line->command;
  if (command == "submit") return RunSubmit(submit, *client, env);
  if (command == "status") return RunStatus(line->arguments[0], *client, env);
  if (command == "watch") return RunWatch(line->arguments[0], WatchOptions(), *client, env);
  if (command == "list") return RunList(list, *client, env);
  if (command == "workers") return RunWorkers(*client, env);
  if (command == "cancel") {
    return RunCancel(line->arguments[0], line->Value("reason", "cancelled from the command line"),
                     *client, env);
  }
  if (command == "debug") {
    absl::Duration wait = absl::Seconds(5);
    if (line->Has("wait") && !ParseTimeout(line->Value("wait"), &wait)) {
      *env.err << "error: --wait: '" << line->Value("wait")
               << "' is not a duration (e.g. 5s, 500ms)\n";
      return kExitUsage;
    }
    uint32_t entries = 8;
    if (line->Has("entries") && !absl::SimpleAtoi(line->Value("entries"), &entries)) {
      *env.err << "error: --entries: '" << line->Value("entries")
               << "' is not a count (e.g. 8, or 0 for all)\n";
      return kExitUsage;
    }
    DebugOptions debug;
    debug.wait_ms = static_cast<uint32_t>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(wait), 1, 60000));
    debug.entries = entries;
    return RunDebug(line->arguments[0], debug, *client, env);
  }
  if (command == "doctor") {
    DoctorOptions doctor;
    doctor.workers = line->arguments;
    if (line->Has("min_fraction")) {
      double fraction = 0;
      if (!absl::SimpleAtod(line->Value("min_fraction"), &fraction) || fraction <= 0 ||
          fraction >= 1) {
        *env.err << "error: --min_fraction: '" << line->Value("min_fraction")
                 << "' is not a number in (0, 1) (e.g. 0.5)\n";
        return kExitUsage;
      }
      doctor.min_fraction = fraction;
    }
    if (line->Has("wait")) {
      absl::Duration wait;
      if (!ParseTimeout(line->Value("wait"), &wait) || wait <= absl::ZeroDuration()) {
        *env.err << "error: --wait: '" << line->Value("wait")
                 << "' is not a duration (e.g. 30s)\n";
        return kExitUsage;
      }
      doctor.wait_ms = static_cast<uint32_t>(
          std::clamp<int64_t>(absl::ToInt64Milliseconds(wait), 1, 600000));
    }
    return RunDoctor(doctor, *client, env);
  }
  if (command == "uncordon") return RunUncordon(line->arguments[0], *client, env);
  if (command == "metrics") return RunMetrics(line->arguments[0], metrics, *client, env);
  if (command == "plot") return RunPlot(line->arguments[0], plot, *client, env);
  if (command == "logs") return RunLogs(line->arguments[0], logs, *client, env);
  if (command == "export") {
    return RunExport(line->arguments[0], line->Value("output"), *client, env);
  }
  // Commands() and this dispatch disagree: a programmer bug.
  *env.err << "internal error: command '" << command << "' has no implementation\n";
  return kExitFailure;
}

}  // namespace ringleader
