// One rank of a command job (`JobSpec.command`): the rank process turns launcher and runs the
// user's program (a PyTorch script written for torchrun) as its child, under the coordinator.
//
//   resolve command[0] and workdir ──missing──> FinishRank(failed, job error: not restarted)
//        │
//   CUDA_VISIBLE_DEVICES (GPU worker) ──the assignment's GPUs cannot hold LOCAL_RANK──>
//        │                              FinishRank(failed: this worker's, restartable)
//        │
//   JoinJob (spec fingerprint)
//        │
//   MASTER_ADDR:MASTER_PORT ── rank 0 reserves a free port on its collective address and
//        │                     publishes it in the attempt's key-value store; the others read it
//        │
//   start the command (CommandEnvironment; stdout shared with this process, stderr through an
//        │            OutputTail that keeps its last lines) ── keepalive reports meanwhile
//        │
//        ├─ the coordinator says stop (cancelled, failed elsewhere) ──> SIGTERM, SIGKILL after
//        │                                                             kill_grace
//        ▼
//   exit code 0 ──> FinishRank(ok)
//   otherwise   ──> FinishRank(failed, "command exited with code 1: <stderr's last line>" and
//                   the last lines of stderr), typed (FinishRankRequest.failure): JOB_ERROR
//                   when the script raised ringleader.JobError (not restarted); else SIGNAL
//                   with its number, STOPPED after the coordinator's stop, or EXITED: restarted
//                   under max_restarts
//
// The command shares this process's group: the worker's SIGTERM to the group reaches both.
// The user's script reports its own steps (the Python package, ringleader.torch.watch); this
// process only keeps the rank known to be alive while the script runs.
#ifndef RINGLEADER_WORKER_LAUNCHER_COMMAND_RANK_H_
#define RINGLEADER_WORKER_LAUNCHER_COMMAND_RANK_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/key_value_store.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/rank/training_loop.h"

namespace ringleader {

// The attempt key-value store key under which rank 0 publishes "host:port".
inline constexpr char kTorchMasterKey[] = "ringleader/torch_master";

// The file (in CommandRankOptions::default_workdir, the attempt directory) the command's
// ringleader package writes "JOB_ERROR" to when the script raised ringleader.JobError; the
// command finds its path in RINGLEADER_FAILURE_FILE.
inline constexpr char kCommandFailureFile[] = "rank_failure";

struct CommandRankOptions {
  std::string worker_id;
  // RINGLEADER_COORDINATOR for the script.
  std::string coordinator_address;
  // RINGLEADER_TLS_DIR for the script ("" = plaintext).
  std::string tls_dir;
  // MASTER_ADDR when this is rank 0 (the address peers reach this host at).
  std::string collective_host = "127.0.0.1";
  // Root of the ringleader Python package, prepended to PYTHONPATH ("" = none).
  std::string python_path;
  // Working directory when the spec has none (the worker's attempt directory).
  std::string default_workdir;
  // The worker's GPU (-1 = CPU); see CommandEnvInputs::gpu.
  int gpu = -1;
  // The rank's snapshots in memory (its --snapshot_dir; "" = none): RINGLEADER_SNAPSHOT_DIR for
  // the script (ringleader.torch.snapshot/restore). Left for the next attempt when the command
  // fails; removed once it exited 0 (the job ended here: nothing resumes from it).
  std::string snapshot_dir;
  // The environment the command inherits ("KEY=VALUE"; e.g. this process's environ).
  std::vector<std::string> inherited_env;
  // How long ranks other than 0 wait for rank 0's address.
  absl::Duration rendezvous_timeout = absl::Seconds(120);
  // FinishRank is retried for this long while the coordinator is unreachable.
  absl::Duration coordinator_grace = absl::Seconds(60);
  absl::Duration coordinator_retry_pause = absl::Seconds(1);
  // SIGTERM -> SIGKILL when the coordinator says stop.
  absl::Duration kill_grace = absl::Seconds(5);
  // Empty ReportProgress calls while the command runs (the coordinator's silent-rank check),
  // and how often the launcher looks for a stop.
  absl::Duration keepalive_interval = absl::Seconds(1);
  absl::Duration stop_poll_interval = absl::Milliseconds(200);
  // Lines of the command's stderr quoted in a failure report.
  size_t quoted_stderr_lines = 8;
  // Where the command's stderr is copied to (this process's stderr).
  int stderr_tee_fd = 2;
  // The attempt's key-value store (not owned; required).
  KeyValueStore* store = nullptr;
};

// Runs the command and reports its end with FinishRank. `status` is OK when the command exited
// with code 0; otherwise it holds the reported error.
RankRunResult RunCommandRank(const v1::Assignment& assignment, CoordinatorClient* client,
                             const CommandRankOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_LAUNCHER_COMMAND_RANK_H_
