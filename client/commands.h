// The `ringleader` commands, as plain functions over a JobClient and output streams, so tests
// drive them with a gMock client and string streams. Each returns the process exit code.
#ifndef RINGLEADER_CLIENT_COMMANDS_H_
#define RINGLEADER_CLIENT_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/job_client.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the call failed, or the job did not pass
inline constexpr int kExitUsage = 2;    // bad command line or bad job spec
inline constexpr int kExitUnreachable = 3;  // the coordinator did not answer (UNAVAILABLE,
                                            // DEADLINE_EXCEEDED): worth retrying later

// What the commands need from outside; main() fills it with the real things.
struct CommandEnvironment {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // Whether `out` is a terminal: `watch` then rewrites one progress line with '\r'.
  bool out_is_tty = false;
  // Paces the plain progress lines of `watch`.
  Clock* clock = nullptr;
  // Waits between retries when the coordinator is unavailable during `watch`.
  std::function<void(absl::Duration)> sleep;
  // Reads the spec file of `submit`.
  std::function<absl::StatusOr<std::string>(const std::string& path)> read_file;
  // Shown in hints when the coordinator cannot be reached.
  std::string coordinator_address;
  // --coordinator when the flag is not given ($RINGLEADER_COORDINATOR; main fills it); "" =
  // kDefaultCoordinator.
  std::string default_coordinator;
  // --tls_dir when the flag is not given ($RINGLEADER_TLS_DIR; main fills it).
  std::string default_tls_dir;
  // The bearer token when --token_file is not given ($RINGLEADER_TOKEN; main fills it).
  std::string default_token;
  // --output json (or --json): commands print the API's messages in protobuf's JSON mapping
  // (proto field names) instead of text; streams (watch, logs) one message per line.
  bool json = false;
};

// `list`: which jobs.
struct ListOptions {
  // Only jobs in these states ("running", "failed", ...); empty = every state.
  std::vector<v1::JobState> states;
  // At most this many, the most recently submitted (0 = all).
  size_t limit = 0;
  // Also the jobs the coordinator archived (finished jobs beyond its --jobs_kept).
  bool archived = false;
};

// "queued" -> JOB_STATE_QUEUED, ... (case-insensitive). INVALID_ARGUMENT naming --state and
// the choices otherwise.
absl::StatusOr<v1::JobState> ParseJobStateName(const std::string& name);

// One command-line change to the spec: `source` is the flag as typed ("--lr", "--set").
struct SpecOverride {
  std::string source;
  std::string path;   // field path, e.g. "optimizer.learning_rate"
  std::string value;  // as in YAML
};

struct WatchOptions {
  // Server-side wait of each WatchJob long poll.
  absl::Duration poll_wait = absl::Seconds(5);
  // Interval of progress lines when stdout is not a terminal.
  absl::Duration plain_interval = absl::Seconds(5);
  // Consecutive UNAVAILABLE / DEADLINE_EXCEEDED answers tolerated before giving up; the wait
  // between retries doubles from 0.5 s up to 8 s.
  int max_retries = 8;
};

struct SubmitOptions {
  std::string spec_path;  // empty: defaults plus overrides only
  std::vector<SpecOverride> overrides;
  bool watch = false;
  WatchOptions watch_options;
};

// `metrics`: where and how the job's step metrics are written.
struct MetricsOptions {
  std::string format = "csv";  // "csv" or "json"
  std::string output_path;     // empty: stdout
};

// `plot`: where the charts go.
struct PlotOptions {
  std::string output_path;  // FILE.svg or FILE.png (required)
  // What converts SVG to PNG for a .png file: a program name looked up in PATH, or a path.
  std::string rsvg_convert = "rsvg-convert";
};

// `debug`: how long to wait for the ranks' rings, and how much of each to print.
struct DebugOptions {
  uint32_t wait_ms = 5000;  // 1 .. 60000
  uint32_t entries = 8;     // the newest entries shown per rank; 0 = all
};

// `doctor`: which workers, and the judge's fraction.
struct DoctorOptions {
  std::vector<std::string> workers;  // names; empty = every idle worker not quarantined
  std::optional<double> min_fraction;  // unset = the coordinator's default (0.5)
  uint32_t wait_ms = 0;                // 0 = the coordinator's longest wait (30 s)
};

// `logs`: which output, and whether to follow it.
struct LogsOptions {
  // One rank, printed raw; unset: every rank, each line prefixed "[rank R] ".
  std::optional<uint32_t> rank;
  // The attempt; 0 = the latest (and, when following, the job's next ones).
  uint64_t generation = 0;
  // Only the last N lines of each rank's output kept (then, following, the new ones); -1 = all.
  int64_t tail = -1;
  // Keep printing new output until the attempt is over (with `generation` 0: the job).
  bool follow = false;
  // Server-side wait of each long poll while following.
  absl::Duration poll_wait = absl::Seconds(10);
  // Consecutive UNAVAILABLE / DEADLINE_EXCEEDED answers tolerated while following (as watch).
  int max_retries = 8;
};

// OK, or INVALID_ARGUMENT naming --format and its choices.
absl::Status CheckMetricsOptions(const MetricsOptions& options);

// The spec `submit` sends: the YAML file (if any), then the overrides in order, world_size 2
// when neither set it, defaults, validation. Errors: INVALID_ARGUMENT (located in the file or
// naming the flag), NOT_FOUND / other codes from read_file.
absl::StatusOr<v1::JobSpec> BuildSubmitSpec(const SubmitOptions& options,
                                            const CommandEnvironment& env);

int RunSubmit(const SubmitOptions& options, JobClient& client, const CommandEnvironment& env);
// `plan`: builds the spec as `submit` does (options.watch is ignored) and prints the predicted
// per-rank memory of every strategy at its world_size (plan/memory_plan.h), as a table or,
// with env.json, as a v1.MemoryPlan. Needs no coordinator. Exit 2 for an invalid spec or one
// that cannot be planned (a command job).
int RunPlan(const SubmitOptions& options, const CommandEnvironment& env);
// The table `plan` prints.
std::string FormatMemoryPlan(const v1::MemoryPlan& plan, const v1::JobSpec& spec);
// `status` and `workers` end with "coordinator: HOST:PORT (leader)" when the client names the
// coordinator that answered (JobClient::AnsweringLeader: several coordinators were given, or a
// standby sent the call on); not with --output json.
int RunStatus(const std::string& job_id, JobClient& client, const CommandEnvironment& env);
// Follows the job to a terminal state, then prints the coordinator's verdict; exit 0 only when
// the job SUCCEEDED and the verdict is PASS or WARN.
int RunWatch(const std::string& job_id, const WatchOptions& options, JobClient& client,
             const CommandEnvironment& env);
int RunList(const ListOptions& options, JobClient& client, const CommandEnvironment& env);
int RunWorkers(JobClient& client, const CommandEnvironment& env);
// `ringleader debug JOB`: where each rank is in its collectives and the first one they
// disagree on (hang forensics).
int RunDebug(const std::string& job_id, const DebugOptions& options, JobClient& client,
             const CommandEnvironment& env);
int RunCancel(const std::string& job_id, const std::string& reason, JobClient& client,
              const CommandEnvironment& env);
// `ringleader doctor [WORKER...]`: runs a pre-flight check and prints each worker's matmul
// rate, each pair's bandwidth and latency, who was quarantined and why. Exit 0 when every
// worker passed, 1 otherwise (a worker named, a bad pair, a rank without figures).
int RunDoctor(const DoctorOptions& options, JobClient& client, const CommandEnvironment& env);
// `ringleader uncordon WORKER`: releases a quarantined worker.
int RunUncordon(const std::string& worker, JobClient& client, const CommandEnvironment& env);
// Prints the job's per-step, per-rank metrics as CSV or JSON, or writes them to
// options.output_path (atomically) and prints a one-line summary. Exit 2 for a bad format.
int RunMetrics(const std::string& job_id, const MetricsOptions& options, JobClient& client,
               const CommandEnvironment& env);

// OK, or an error naming -o/--output and the fix: INVALID_ARGUMENT (no output file, or an
// extension other than .svg and .png), FAILED_PRECONDITION (a .png while options.rsvg_convert
// cannot be found: Debian's librsvg2-bin provides it).
absl::Status CheckPlotOptions(const PlotOptions& options);

// Draws the job's per-step, per-rank metrics (GetJobMetrics, as `metrics` fetches them) as
// charts (client/plot_svg.h) into options.output_path, written atomically; a .png is the SVG
// converted by rsvg-convert. Prints a one-line summary. Exit 2 for bad options, 1 when the
// file cannot be written or converted.
int RunPlot(const std::string& job_id, const PlotOptions& options, JobClient& client,
            const CommandEnvironment& env);

// Prints the ranks' output the coordinator keeps (GetLogs; "[rank R: N bytes not kept]" where
// some of it is gone), and with options.follow the new output until the attempt or the job is
// over ("--- generation G ---" when the job goes on to a new attempt).
int RunLogs(const std::string& job_id, const LogsOptions& options, JobClient& client,
            const CommandEnvironment& env);

// Writes the job's final weights (its final checkpoint, read from the path the coordinator
// recorded) to `output_path` as safetensors. Exit 1 when the job has no final checkpoint or it
// cannot be read or written (the message says which).
int RunExport(const std::string& job_id, const std::string& output_path, JobClient& client,
              const CommandEnvironment& env);

// Writes the sharded checkpoint whose manifest is `manifest_path` as one consolidated
// checkpoint at `output_path` (ConsolidateShards, written atomically; an existing file is
// replaced). Needs no coordinator. Exit 1 when the manifest cannot be read, is not a sharded
// manifest (an already consolidated checkpoint), its shards are missing or damaged, or the
// output cannot be written (the message names the path).
int RunConsolidate(const std::string& manifest_path, const std::string& output_path,
                   const CommandEnvironment& env);

// The text `status` prints for `job`, with the coordinator's verdict, alarms and stragglers.
std::string FormatJobStatus(const v1::JobStatus& job);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_COMMANDS_H_
