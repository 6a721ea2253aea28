// The state a rank's training starts from: a resumed checkpoint, model.init_from, or the seed.
#include "worker/rank/starting_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/checkpoint/initial_weights.h"
#include "worker/checkpoint/training_state.h"

namespace ringleader {
namespace {

// model.init_from: any failure is the job's (a path or file the user gave).
absl::Status InitFromError(const absl::Status& status) {
  // The spec names a file this job cannot start from: running it again fails again.
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat("model.init_from: ", status.message())),
      v1::RankFailure::JOB_ERROR);
}

}  // namespace

absl::StatusOr<std::optional<StartingOptimizerState>> LoadStartingState(
    const v1::JobSpec& spec, uint32_t rank, const std::string& fingerprint,
    const ResumeDecision& resume, const SgdOptions& sgd, Mlp* model) {
  if (resume.checkpoint.has_value()) {
    SgdOptimizer resumed(model->parameters(), sgd);
    const CheckpointData* checkpoint = &*resume.checkpoint;
    CheckpointData assembled;
    if (IsShardedManifest(*checkpoint)) {
      // The model's own tensors under rank 0's whole ones and this rank's slices.
      absl::StatusOr<CheckpointData> read =
          AssembleShards(resume.path, *checkpoint, rank, spec.world_size(),
                         CaptureTrainingState(model, resumed, 0, 0, fingerprint));
      if (!read.ok()) {
        return WithPrefix(read.status(), absl::StrCat("resuming from ", resume.path, ": "));
      }
      assembled = *std::move(read);
      checkpoint = &assembled;
    }
    const absl::Status restored = RestoreTrainingState(*checkpoint, fingerprint, model, &resumed);
    if (!restored.ok()) {
      return WithFailureKind(
          WithPrefix(restored, absl::StrCat("resuming from ", resume.path, ": ")),
          v1::RankFailure::IO_ERROR);
    }
    return StartingOptimizerState{resumed.momentum_buffers(), resumed.step_count(),
                                  absl::StrCat("resuming from ", resume.path)};
  }
  const std::string& path = spec.model().init_from();
  if (path.empty()) return std::nullopt;
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  if (!weights.ok()) return InitFromError(weights.status());
  std::optional<StartingOptimizerState> state;
  if (spec.model().init_optimizer_state()) {
    // Checked before the weights go in, so a refused file leaves the model as it was.
    absl::StatusOr<std::vector<std::vector<float>>> momentum = InitialMomentum(*weights, model);
    if (!momentum.ok()) return InitFromError(momentum.status());
    state = StartingOptimizerState{*std::move(momentum), /*step_count=*/0,
                                   absl::StrCat("model.init_from ", path)};
  }
  const absl::Status loaded = LoadInitialWeights(*weights, model);
  if (!loaded.ok()) return InitFromError(loaded);
  return state;
}

}  // namespace ringleader
