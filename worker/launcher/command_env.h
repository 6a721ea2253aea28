// What a command job's rank process gets: its environment (torchrun's variables and
// ringleader's, see common/command_spec.h), the program's resolved path, and the rendezvous
// port rank 0 reserves for torch.distributed's TCPStore.
#ifndef RINGLEADER_WORKER_LAUNCHER_COMMAND_ENV_H_
#define RINGLEADER_WORKER_LAUNCHER_COMMAND_ENV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

struct CommandEnvInputs {
  // The launcher's own environment ("KEY=VALUE" each; e.g. from environ).
  std::vector<std::string> inherited;
  // RINGLEADER_COORDINATOR (host:port).
  std::string coordinator_address;
  // RINGLEADER_TLS_DIR: the worker's --tls_dir (ca.pem, worker.pem, worker.key) the Python hook
  // connects with; "" = plaintext (--insecure).
  std::string tls_dir;
  // MASTER_ADDR and MASTER_PORT: rank 0's collective address and its reserved port.
  std::string master_addr;
  int master_port = 0;
  // Prepended to PYTHONPATH (the ringleader Python package's root); "" = none.
  std::string python_path;
  // RINGLEADER_CHECKPOINT_DIR ("" = unset): <checkpoint_dir>/<job>.
  std::string checkpoint_dir;
  // The worker's GPU (-1 = CPU worker): LOCAL_RANK is the GPU index, so a torchrun script's
  // torch.cuda.set_device(LOCAL_RANK) picks this worker's GPU.
  int gpu = -1;
};

// The whole environment of the rank's command, sorted by name: the inherited variables, then
// the job's `env` over them, then the variables ringleader sets over both (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// ROLE_NAME, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT (generation - 1),
// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID (the job id), RINGLEADER_COORDINATOR,
// RINGLEADER_JOB, RINGLEADER_GENERATION, RINGLEADER_RANK, RINGLEADER_CHECKPOINT_DIR,
// RINGLEADER_DRIFT_INTERVAL_STEPS: the spec's drift_interval_steps, watch()'s default).
// OMP_NUM_THREADS is 1 unless the job's env or the inherited environment sets it (torchrun's
// rule: several ranks on one host must not oversubscribe its cores).
std::vector<std::string> CommandEnvironment(const v1::Assignment& assignment,
                                            const CommandEnvInputs& inputs);

// The file `program` names: a path with a '/' as it is (relative ones against `workdir`), a
// bare name looked up in `path_variable` (PATH's value). NOT_FOUND naming command[0], what was
// searched and the fix when it is missing or not executable.
absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path_variable,
                                           const std::string& workdir);

// A TCP port free on `host` right now (bound to port 0 and released). The port may be taken by
// someone else before its user binds it; the window is short. Errors: INVALID_ARGUMENT (host is
// not an IPv4/IPv6 address), UNAVAILABLE (socket errors).
absl::StatusOr<int> ReserveFreePort(const std::string& host);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_LAUNCHER_COMMAND_ENV_H_
