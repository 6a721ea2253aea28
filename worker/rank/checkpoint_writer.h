// A rank's part in writing its job's checkpoints (<checkpoint_dir>/<job>/,
// checkpoint/checkpoint_series.h):
//
//   periodic, checkpoint_format consolidated (the default): a strategy that does not hold the
//     whole state on every rank gathers it (SyncStrategy::GatherCheckpointState: the momentum
//     shards; fsdp also the parameters, released after the write), then rank 0 writes
//     step-N.ckpt in ddp's format and rotates the older ones;
//   periodic, checkpoint_format sharded (zero1 / zero2 / fsdp): no gather. Every rank writes
//     step-N.shard-<r>-of-<W> (SyncStrategy::CaptureShard, checkpoint/sharded_checkpoint.h);
//     one 1-float all-reduce then tells every rank whether every shard was written, so rank 0
//     writes the manifest step-N.ckpt (sizes and checksums read back from the files) only once
//     all are (the commit point), and rotates;
//   final: PrepareFinal gathers as the consolidated periodic write does (while the collective is open); rank 0 writes final.ckpt (always consolidated: what
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
#include "checkpoint/file_io.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/collective.h"
#include "worker/rank/model_runner.h"
#include "worker/strategy/sync_strategy.h"

namespace ringleader {

struct CheckpointWriterContext {
  const v1::Assignment* assignment = nullptr;
  const v1::JobSpec* spec = nullptr;  // defaults applied
  std::string fingerprint;            // the spec's
  ModelRunner* runner = nullptr;
  SyncStrategy* strategy = nullptr;  // connected to `runner` and `comm`
  Collective* comm = nullptr;
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
  // checkpoint_dir: gathers what rank 0 needs for final.ckpt (GatherCheckpointState, kept: the
  // run is over); nothing where every rank holds the whole state. Errors: the gathers'.
  absl::Status PrepareFinal();

  // Rank 0 with a checkpoint_dir: writes final.ckpt (`steps` run, `epoch` the next one) and
  // returns its path; "" elsewhere. Errors: OpenJobCheckpointDir's, WriteCheckpoint's; INTERNAL
  // for a strategy that needs PrepareFinal without it.
  absl::StatusOr<std::string> WriteFinal(uint64_t steps, uint64_t epoch);

 private:
  absl::StatusOr<std::string> WriteConsolidated(uint64_t step, uint64_t epoch);
  absl::StatusOr<std::string> WriteSharded(uint64_t step, uint64_t epoch);
  // The consolidated state; with `momentum` gathered from every rank where the strategy needs it.
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
