// Sharded checkpoints (JobSpec.checkpoint_format "sharded", strategies zero1 / zero2 / fsdp):
// every rank writes its own shard file next to the periodic checkpoint, then rank 0 writes the
// periodic checkpoint itself as a manifest naming the shards: the manifest is the commit point,
// so a crash before it leaves the previous checkpoint the newest.
//
//   <checkpoint_dir>/<job>/step-000000000040.shard-0-of-4   rank 0: whole parameters and buffers
//                                                           (zero1, zero2), its slices
//   <checkpoint_dir>/<job>/step-000000000040.shard-1-of-4   rank 1: its slices
//   ...
//   <checkpoint_dir>/<job>/step-000000000040.ckpt           the manifest (checkpoint.h's format,
//                                                           no tensors), written last
//
// A shard is a checkpoint file (checkpoint.h): step, epoch and fingerprint as the manifest's;
// a slice is a tensor of shape [n] holding elements [begin, begin + n) of the tensor of the same
// name (a momentum buffer "<parameter>.momentum_buffer", or under fsdp a parameter), with the
// attribute "slice.<name>" = begin. The manifest's attributes: "checkpoint.format" = "sharded",
// "world_size", "strategy", and per rank r "shard.<r>.name", "shard.<r>.bytes" and
// "shard.<r>.crc32" (CRC-32 of the whole file, decimal).
//
// Every file is read and written relative to the job's opened directory or with O_NOFOLLOW
// (file_io.h), never through a symbolic link.
// Thread-safety: free functions without shared state.
#ifndef RINGLEADER_WORKER_CHECKPOINT_SHARDED_CHECKPOINT_H_
#define RINGLEADER_WORKER_CHECKPOINT_SHARDED_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/file_io.h"

namespace ringleader {

// "step-000000000040.shard-1-of-4" for the manifest "step-000000000040.ckpt" (the manifest's
// name without ".ckpt", then ".shard-<rank>-of-<world>").
std::string ShardFileName(const std::string& manifest_name, uint32_t rank, uint32_t world);

// The names of the shard files of the manifest `manifest_name` among `names`: those starting
// with "<manifest name without .ckpt>.shard-".
std::vector<std::string> ShardFilesOf(const std::string& manifest_name,
                                      const std::vector<std::string>& names);

// True when `data` is a manifest (attribute "checkpoint.format" = "sharded").
bool IsShardedManifest(const CheckpointData& data);

// Adds to `shard` the slice [begin, begin + values.size()) of the tensor `name`.
void AddSlice(CheckpointData* shard, const std::string& name, uint64_t begin,
              std::vector<float> values);

// Rank 0, once every rank's shard is written: reads each shard file of `manifest_name` back
// from `dir` and returns the manifest naming them with their sizes and checksums.
// Errors: DirectoryHandle::ReadFile's for a shard that cannot be read (NOT_FOUND when missing).
absl::StatusOr<CheckpointData> BuildManifest(const DirectoryHandle& dir,
                                             const std::string& manifest_name, uint64_t step,
                                             uint64_t epoch, const std::string& fingerprint,
                                             uint32_t world, const std::string& strategy);

// Checks that every shard the manifest names is in `dir` with its recorded size and checksum.
// Errors: DATA_LOSS "shard <path> ..." for a shard of another size or checksum, and for a
// manifest without world_size or a shard list; DirectoryHandle::ReadFile's (NOT_FOUND
// "checkpoint <path> does not exist").
absl::Status VerifyShards(const DirectoryHandle& dir, const CheckpointData& manifest);

// Rank `rank`'s view of the sharded checkpoint whose manifest (read from `manifest_path`) is
// `manifest`, in the consolidated form RestoreTrainingState takes: `base` (the model's own
// tensors) overlaid with rank 0's whole tensors, then with this rank's slices (a momentum buffer
// this rank has a slice of is made whole-sized, zero outside the slice: the caller keeps only
// the owned elements). Reads rank 0's and this rank's shard files with O_NOFOLLOW.
// Errors: FAILED_PRECONDITION when the manifest has another world size than `world`; the reads'
// (ReadCheckpoint's: NOT_FOUND, DATA_LOSS, ...); DATA_LOSS "shard <path> ..." for a shard of
// another step or fingerprint than the manifest's, or a slice that does not fit its tensor.
absl::StatusOr<CheckpointData> AssembleShards(const std::string& manifest_path,
                                              const CheckpointData& manifest, uint32_t rank,
                                              uint32_t world, CheckpointData base);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_SHARDED_CHECKPOINT_H_
