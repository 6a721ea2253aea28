// A rank's part in writing its job's checkpoints (<checkpoint_dir>/<job>/, checkpoint_series.h):
//
//   periodic, checkpoint_format consolidated (the default): under zero1 / zero2 / fsdp every
//     rank all-gathers its momentum shard (StepRunner::GatherMomentum; fsdp also gathers the
//     parameters whole, released after the write), then rank 0 writes step-N.ckpt in ddp's
//     format and rotates the older ones;
//   periodic, checkpoint_format sharded (zero1 / zero2 / fsdp): no gather. Every rank writes
//     step-N.shard-<r>-of-<W> (sharded_checkpoint.h: its momentum slices, fsdp its parameter
//     slices; rank 0 also the whole parameters and buffers under zero1 / zero2); one 1-float
//     all-reduce then tells every rank whether every shard was written, so rank 0 writes the
//     manifest step-N.ckpt (sizes and checksums read back from the files) only once all are
//     (the commit point), and rotates;
//   final: under zero1 / zero2 / fsdp PrepareFinal gathers as the consolidated periodic write
//     does (while the collective is open); rank 0 writes final.ckpt (always consolidated: what
//     `ringleader export` and model.init_from read).
//
// Each rank opens the job's directory once, at its first write (resume.h: OpenJobCheckpointDir,
// never through a symbolic link) and keeps it for the attempt.
// Thread-safety: not thread-safe; the training thread owns it.
#ifndef RINGLEADER_WORKER_RANK_CHECKPOINT_WRITER_H_
#define RINGLEADER_WORKER_RANK_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "worker/checkpoint/file_io.h"
#include "worker/collective/collective.h"
#include "worker/rank/model_runner.h"
#include "worker/rank/step_runner.h"
#include "worker/sync/fsdp_parameters.h"
#include "worker/sync/shard_plan.h"

namespace ringleader {

struct CheckpointWriterContext {
  const v1::Assignment* assignment = nullptr;
  const v1::JobSpec* spec = nullptr;  // defaults applied
  std::string fingerprint;            // the spec's
  ModelRunner* runner = nullptr;
  StepRunner* steps = nullptr;
  Collective* comm = nullptr;
  const ShardPlan* shards = nullptr;  // zero1 / zero2 / fsdp; null under ddp
  FsdpParameters* fsdp = nullptr;     // fsdp only
  absl::Duration timeout = absl::Seconds(60);
  // Tells where the rank is (RANK_PHASE_CHECKPOINTING, detail).
  std::function<void(v1::RankPhase, std::string)> enter;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(CheckpointWriterContext context);

  // Every rank, after step `step` when a periodic checkpoint is due (`epoch`: the one the next
  // step belongs to). Returns the path rank 0 wrote, "" on the other ranks.
  // Errors: the gathers' and the all-reduce's (collective errors); rank 0: OpenJobCheckpointDir's,
  // WriteCheckpoint's / WritePeriodicCheckpoint's, BuildManifest's. sharded: a rank whose shard
  // could not be written returns that error, every other rank ABORTED "checkpoint after step N:
  // ... rank(s) could not write their shard ...", and no manifest is written.
  absl::StatusOr<std::string> WritePeriodic(uint64_t step, uint64_t epoch);

  // Every rank, after the last step while the collective is still open, when the job has a
  // checkpoint_dir: under zero1 / zero2 / fsdp gathers the momentum (and fsdp's parameters,
  // kept: the run is over) for final.ckpt; nothing otherwise. Errors: the gathers'.
  absl::Status PrepareFinal();

  // Rank 0 with a checkpoint_dir: writes final.ckpt (`steps` run, `epoch` the next one) and
  // returns its path; "" elsewhere. Errors: OpenJobCheckpointDir's, WriteCheckpoint's; INTERNAL
  // under zero1 / zero2 / fsdp without PrepareFinal.
  absl::StatusOr<std::string> WriteFinal(uint64_t steps, uint64_t epoch);

 private:
  absl::StatusOr<std::string> WriteConsolidated(uint64_t step, uint64_t epoch);
  absl::StatusOr<std::string> WriteSharded(uint64_t step, uint64_t epoch);
  // This rank's shard of the checkpoint after `step`.
  absl::StatusOr<CheckpointData> CaptureShard(uint64_t step, uint64_t epoch);
  // The consolidated state; under zero1 / zero2 / fsdp with `momentum` gathered from every rank.
  absl::StatusOr<CheckpointData> Capture(uint64_t step, uint64_t epoch,
                                         std::optional<std::vector<std::vector<float>>> momentum);
  absl::StatusOr<const DirectoryHandle*> Directory();

  const CheckpointWriterContext c_;
  const uint32_t rank_;
  const uint32_t world_;
  std::optional<DirectoryHandle> dir_;
  std::optional<std::vector<std::vector<float>>> final_momentum_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_CHECKPOINT_WRITER_H_
