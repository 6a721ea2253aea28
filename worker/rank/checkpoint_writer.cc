// Periodic and final checkpoints of one rank: consolidated (gathered to rank 0) or sharded.
#include "worker/rank/checkpoint_writer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/spec_kinds.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"
#include "worker/rank/resume.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/sgd.h"

namespace ringleader {

CheckpointWriter::CheckpointWriter(CheckpointWriterContext context)
    : c_(std::move(context)), rank_(c_.assignment->rank()), world_(c_.assignment->world_size()) {}

absl::StatusOr<std::string> CheckpointWriter::WritePeriodic(uint64_t step, uint64_t epoch) {
  if (CheckpointFormatOf(*c_.spec) == CheckpointFormat::kSharded &&
      !c_.strategy->holds_whole_state()) {
    return WriteSharded(step, epoch);
  }
  return WriteConsolidated(step, epoch);
}

absl::StatusOr<std::string> CheckpointWriter::WriteConsolidated(uint64_t step, uint64_t epoch) {
  std::optional<std::vector<std::vector<float>>> momentum;
  const bool gathered = !c_.strategy->holds_whole_state();
  if (gathered) {
    // Every rank hands its part of the state to the file rank 0 writes.
    c_.enter(v1::RANK_PHASE_CHECKPOINTING,
             absl::StrCat("gathering the optimizer state after step ", step));
    ASSIGN_OR_RETURN(momentum, c_.strategy->GatherCheckpointState());
  }
  std::string written;
  if (rank_ == 0) {
    c_.enter(v1::RANK_PHASE_CHECKPOINTING,
             absl::StrCat("after step ", step, " in ",
                          JobCheckpointDir(*c_.spec, c_.assignment->job_id())));
    absl::StatusOr<CheckpointData> state = Capture(step, epoch, std::move(momentum));
    absl::StatusOr<const DirectoryHandle*> dir = Directory();
    absl::StatusOr<std::string> path =
        !state.ok() ? state.status()
        : !dir.ok() ? dir.status()
                    : WritePeriodicCheckpoint(**dir, *state, c_.spec->keep_last_checkpoints());
    if (!path.ok()) {
      if (gathered) c_.strategy->ReleaseCheckpointState();
      return path.status();
    }
    written = *path;
  }
  if (gathered) c_.strategy->ReleaseCheckpointState();
  return written;
}

absl::StatusOr<std::string> CheckpointWriter::WriteSharded(uint64_t step, uint64_t epoch) {
  const std::string manifest = PeriodicCheckpointName(step);
  const std::string name = ShardFileName(manifest, rank_, world_);
  c_.enter(v1::RANK_PHASE_CHECKPOINTING, absl::StrCat("writing ", name));
  absl::Status written = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const CheckpointData shard,
                     c_.strategy->CaptureShard(step, epoch, c_.fingerprint));
    ASSIGN_OR_RETURN(const DirectoryHandle* dir, Directory());
    return WriteCheckpoint(*dir, name, shard);
  }();
  // Whether every rank's shard is written: the manifest comes after all of them, or not at all.
  ASSIGN_OR_RETURN(StagedBytes flag, StagedBytes::Create(c_.runner->memory(), sizeof(float)));
  const float failed = written.ok() ? 0.0f : 1.0f;
  std::memcpy(flag.host(), &failed, sizeof(failed));
  CollectiveOptions options;
  options.timeout = c_.timeout;
  RETURN_IF_ERROR(flag.Upload());
  RETURN_IF_ERROR(
      c_.comm->AllReduce(TensorView{flag.wire(), 1, DataType::kFloat32}, ReduceOp::kSum, options)
          ->Wait());
  RETURN_IF_ERROR(flag.Download());
  float failures = 0;
  std::memcpy(&failures, flag.host(), sizeof(failures));
  RETURN_IF_ERROR(written);
  if (failures > 0) {
    return absl::AbortedError(absl::StrCat(
        "checkpoint after step ", step, ": ", static_cast<int>(failures),
        " rank(s) could not write their shard (their own errors name why); no manifest written"));
  }
  if (rank_ != 0) return std::string();
  ASSIGN_OR_RETURN(const DirectoryHandle* dir, Directory());
  ASSIGN_OR_RETURN(
      const CheckpointData index,
      BuildManifest(*dir, manifest, step, epoch, c_.fingerprint, world_,
                    Name(StrategyOf(*c_.spec))));
  return WritePeriodicCheckpoint(*dir, index, c_.spec->keep_last_checkpoints());
}

absl::Status CheckpointWriter::PrepareFinal() {
  if (c_.strategy->holds_whole_state() || c_.spec->checkpoint_dir().empty()) {
    return absl::OkStatus();
  }
  c_.enter(v1::RANK_PHASE_CHECKPOINTING, "gathering the optimizer state");
  // Kept for final.ckpt (the run is over).
  ASSIGN_OR_RETURN(final_momentum_, c_.strategy->GatherCheckpointState());
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckpointWriter::WriteFinal(uint64_t steps, uint64_t epoch) {
  if (rank_ != 0 || c_.spec->checkpoint_dir().empty()) return std::string();
  c_.enter(v1::RANK_PHASE_CHECKPOINTING,
           absl::StrCat(JobCheckpointDir(*c_.spec, c_.assignment->job_id()), "/final.ckpt"));
  ASSIGN_OR_RETURN(const CheckpointData state, Capture(steps, epoch, std::move(final_momentum_)));
  ASSIGN_OR_RETURN(const DirectoryHandle* dir, Directory());
  RETURN_IF_ERROR(WriteCheckpoint(*dir, "final.ckpt", state));
  return dir->PathOf("final.ckpt");
}

absl::StatusOr<CheckpointData> CheckpointWriter::Capture(
    uint64_t step, uint64_t epoch, std::optional<std::vector<std::vector<float>>> momentum) {
  if (c_.strategy->holds_whole_state()) {
    return c_.runner->CaptureState(step, epoch, c_.fingerprint);
  }
  if (!momentum.has_value()) {
    return absl::InternalError("sharded optimizer state without the gathered momentum");
  }
  return c_.runner->CaptureStateWithMomentum(step, epoch, c_.fingerprint, *std::move(momentum));
}

absl::StatusOr<const DirectoryHandle*> CheckpointWriter::Directory() {
  if (!dir_.has_value()) {
    ASSIGN_OR_RETURN(DirectoryHandle opened,
                     OpenJobCheckpointDir(*c_.spec, c_.assignment->job_id(), /*create=*/true));
    dir_.emplace(std::move(opened));
  }
  return &*dir_;
}

}  // namespace ringleader
