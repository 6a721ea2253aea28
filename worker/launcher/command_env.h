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
  // RINGLEADER_COORDINATOR (host:port, or a comma-separated list of them: the worker's
  // --coordinator as is).
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
  // RINGLEADER_SNAPSHOT_DIR ("" = unset): the rank's --snapshot_dir (<the daemon's
  // --snapshot_dir>/<job>, in the worker's memory), where ringleader.torch.snapshot() writes.
  std::string snapshot_dir;
  // The worker's GPU, its --gpu (a CUDA device index as the worker sees it); -1 = CPU worker.
  // Decides CUDA_VISIBLE_DEVICES (see CommandEnvironment), never LOCAL_RANK.
  int gpu = -1;
};

// The whole environment of the rank's command, sorted by name: the inherited variables, then
// the job's `env` over them, then the variables ringleader sets over both (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// ROLE_NAME, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT (generation - 1),
// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID (the job id), RINGLEADER_COORDINATOR,
// RINGLEADER_JOB, RINGLEADER_GENERATION, RINGLEADER_RANK, RINGLEADER_CHECKPOINT_DIR,
// RINGLEADER_SNAPSHOT_DIR, RINGLEADER_DRIFT_INTERVAL_STEPS: the spec's drift_interval_steps,
// watch()'s default; and CUDA_VISIBLE_DEVICES on a GPU worker, below).
// OMP_NUM_THREADS is 1 unless the job's env or the inherited environment sets it (torchrun's
// rule: several ranks on one host must not oversubscribe its cores).
//
// LOCAL_RANK is the rank's index among the job's ranks on its host (Assignment.local_rank,
// 0..LOCAL_WORLD_SIZE-1, a host's ranks in rank order), as torchrun numbers it, on GPU and CPU
// workers alike.
//
// CUDA_VISIBLE_DEVICES on a GPU worker (`inputs.gpu` >= 0): the GPUs of the job's ranks on this
// host (Assignment.local_gpus) in local-rank order, so that device LOCAL_RANK is this worker's
// own GPU: torch.cuda.set_device(LOCAL_RANK) picks it on every rank, NCCL still sees the
// host's other GPUs of the job (peer-to-peer), and the script sees no GPU outside its job.
// E.g. a host whose ranks of the job are on GPUs 3 (local rank 0) and 5 (local rank 1): both
// commands get CUDA_VISIBLE_DEVICES=3,5; the one on GPU 5 gets LOCAL_RANK=1.
//   * Indices: a worker's --gpu, and so every entry of local_gpus, is a CUDA device index as
//     that worker sees it. A worker started without CUDA_VISIBLE_DEVICES writes index i as
//     "i". A worker started with it (in `inputs.inherited`) maps index i to the list's i-th
//     entry, passed on as written (an index, or a GPU-/MIG- UUID); the other local ranks'
//     indices are mapped through this worker's list too, so the workers of one host must share
//     one CUDA_VISIBLE_DEVICES (or none) and differ in --gpu. CUDA_DEVICE_ORDER is inherited
//     unchanged, so an index means the same GPU to the worker and to its command.
//   * One rank on the host: its own GPU (device 0), with or without local_gpus (a coordinator
//     older than that field sends none).
//   * A host where the job also has ranks on CPU workers (a gloo job may mix them): those have
//     no device to hold their place, so device LOCAL_RANK cannot be this worker's GPU; the
//     command sees its own GPU only (device 0), never another rank's.
//   * The job's env cannot choose a GPU worker's devices: this value is set over it.
// A CPU worker leaves CUDA_VISIBLE_DEVICES as inherited (or as the job's env sets it): it
// drives no GPU, so ringleader has none to hand out, and hiding the host's GPUs from a script
// that expects to see them would be a choice the operator did not make.
//
// Errors (GPU workers only): FAILED_PRECONDITION when no list can make device LOCAL_RANK this
// worker's GPU, naming what disagrees: local_gpus missing while the host has several ranks,
// local_gpus[local_rank] not `inputs.gpu`, one GPU listed twice (two workers of the host drive
// the same GPU, or were started with different CUDA_VISIBLE_DEVICES), an index outside this
// worker's CUDA_VISIBLE_DEVICES.
absl::StatusOr<std::vector<std::string>> CommandEnvironment(const v1::Assignment& assignment,
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
