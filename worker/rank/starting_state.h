// What a rank's training starts from, loaded into the host model before the model runner is
// built from it:
//
//   a resumed attempt (ResumeDecision with a checkpoint)  → its parameters and buffers, and its
//       optimizer state (momentum, step count): the job goes on where it stopped. A sharded
//       checkpoint's manifest (checkpoint/sharded_checkpoint.h) is reassembled from rank 0's
//       shard (whole parameters and buffers) and this rank's own (its slices) — AssembleShards;
//   model.init_from                                       → its parameters and buffers; with
//       model.init_optimizer_state also its SGD momentum, at step count 0: a new job (any world
//       size or strategy) continues another job's training rather than restarting the
//       optimizer;
//   neither                                               → the seed's weights, fresh optimizer.
//
// The optimizer state comes back whole (ddp's consolidated form, as checkpoints hold it); the
// caller restores it into the runner after ShardOptimizerState, so under zero1 / zero2 / fsdp
// each rank keeps its owned slice (ModelRunner::RestoreOptimizerState).
#ifndef RINGLEADER_WORKER_RANK_STARTING_STATE_H_
#define RINGLEADER_WORKER_RANK_STARTING_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"
#include "worker/rank/resume.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {

// Optimizer state to put into the runner once it exists.
struct StartingOptimizerState {
  std::vector<std::vector<float>> momentum;  // per parameter, whole; an empty entry = none
  uint64_t step_count = 0;
  std::string source;  // for messages: "resuming from <path>" or "model.init_from <path>"
};

// Loads the starting state (see the file comment) into `model` for rank `rank` and returns the
// optimizer state to restore, or none (fresh optimizer). `spec` has its defaults applied,
// `fingerprint` is its fingerprint (a resumed checkpoint must carry it; an init_from file need
// not), `sgd` the job's optimizer options.
// Errors: resuming — AssembleShards' for a sharded checkpoint (a shard missing or damaged
// since rank 0 checked it), RestoreTrainingState's (FAILED_PRECONDITION), prefixed "resuming
// from <path>: "; model.init_from — FAILED_PRECONDITION "model.init_from: <why>" for anything
// wrong with the file (ReadInitialWeights', LoadInitialWeights', and with
// init_optimizer_state InitialMomentum's: a safetensors file, no momentum, a momentum tensor
// of another shape), so the job is not restarted for it. The model is unchanged on error.
absl::StatusOr<std::optional<StartingOptimizerState>> LoadStartingState(
    const v1::JobSpec& spec, uint32_t rank, const std::string& fingerprint,
    const ResumeDecision& resume, const SgdOptions& sgd, Mlp* model);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_STARTING_STATE_H_
