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
// ConsolidateShards turns the shards and their manifest into one consolidated checkpoint (what
// `ringleader consolidate` writes and model.init_from reads from a manifest).
//
// Every file is read and written relative to the job's opened directory or with O_NOFOLLOW
// (file_io.h), never through a symbolic link.
// Thread-safety: free functions without shared state.
#ifndef RINGLEADER_CHECKPOINT_SHARDED_CHECKPOINT_H_
#define RINGLEADER_CHECKPOINT_SHARDED_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"

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

// Records in `shard` (rank 0's, under fsdp) the model's parameters in order with their shapes,
// which no shard holds whole: attributes "layout.names" (comma-separated) and
// "layout.shape.<name>" ("16x12"). ConsolidateShards reads them.
void RecordModelLayout(CheckpointData* shard, const std::vector<std::string>& names,
                       const std::vector<std::vector<uint64_t>>& shapes);

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
// manifest without world_size or a shard list, or naming a shard that is not a file name in
// its directory; DirectoryHandle::ReadFile's (NOT_FOUND "checkpoint <path> does not exist").
absl::Status VerifyShards(const DirectoryHandle& dir, const CheckpointData& manifest);

// Rank `rank`'s view of the sharded checkpoint whose manifest (read from `manifest_path`) is
// `manifest`, in the consolidated form RestoreTrainingState takes: `base` (the model's own
// tensors) overlaid with rank 0's whole tensors, then with this rank's slices (a momentum buffer
// this rank has a slice of is made whole-sized, zero outside the slice: the caller keeps only
// the owned elements). Reads rank 0's and this rank's shard files with O_NOFOLLOW.
// Errors: FAILED_PRECONDITION when the manifest has another world size than `world`; the reads'
// (ReadCheckpoint's: NOT_FOUND, DATA_LOSS, ...); DATA_LOSS "shard <path> ..." for a shard of
// another step or fingerprint than the manifest's, a slice whose begin is not an element index
// or that does not fit its tensor, and "sharded checkpoint <path> ..." for a manifest naming no
// shard, or one that is not a file name in its directory, for rank 0 or `rank`.
absl::StatusOr<CheckpointData> AssembleShards(const std::string& manifest_path,
                                              const CheckpointData& manifest, uint32_t rank,
                                              uint32_t world, CheckpointData base);

// The sharded checkpoint whose manifest (read from `manifest_path`) is `manifest` as one
// consolidated checkpoint, in the form a consolidated (ddp) checkpoint has: what
// ReadCheckpoint of a final.ckpt returns, for model.init_from, `ringleader consolidate` and
// RestoreTrainingState. Reads every shard the manifest names, from the manifest's directory with
// O_NOFOLLOW, each once: its size and CRC-32 checked against the manifest (as VerifyShards),
// then decoded and checked to be of the manifest's step and fingerprint.
//   Tensors: every tensor whole. Rank 0's whole tensors keep their shard's order; a sliced
//   tensor comes where it is first seen (rank 0's shard first, then rank 1's, ...), except that
//   momentum buffers "<p>.momentum_buffer" of a tensor "<p>" there go, in the order of their
//   parameters, right after the last parameter that has one: CaptureTrainingState's order
//   (parameters, momentum buffers, buffers), so a zero1/zero2 checkpoint consolidates to the
//   very bytes a consolidated checkpoint of the same state has. A sliced tensor's shape is that
//   of rank 0's whole tensor of the same name if there is one (the slices still cover every
//   element), else the shape RecordModelLayout recorded in rank 0's shard (fsdp, where no rank
//   holds a parameter whole: its parameters then come in the layout's order), for
//   "<p>.momentum_buffer" that of the parameter "<p>" (whole, recorded, or [n] with n the end
//   of its slices), otherwise [n] with n the end of its own slices. Every element is covered by
//   exactly one slice.
//   Attributes: rank 0's shard's, without "slice.*"; none of the manifest's (checkpoint.format,
//   world_size, strategy, shard.*). Step, epoch and fingerprint: the manifest's.
// Errors: DATA_LOSS "sharded checkpoint <path> has no world_size" / "... names no shard for
// rank <r>", "... no shard holds any element of <p>" for a parameter the layout names; the
// reads' (NOT_FOUND "checkpoint <shard path>
// does not exist" for a missing shard, FAILED_PRECONDITION for a symbolic link, DATA_LOSS for a
// damaged file); DATA_LOSS "shard <path> ..." for a shard of another size or CRC-32 than the
// manifest's, of another step or fingerprint, one holding a whole tensor other than rank 0's,
// a slice whose begin is not an element index, and, naming the tensor and the element range,
// a slice that runs past the end of its tensor, overlaps another shard's or leaves a gap
// (elements no shard holds, at the start, between slices or at the end).
absl::StatusOr<CheckpointData> ConsolidateShards(const std::string& manifest_path,
                                                 const CheckpointData& manifest);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_SHARDED_CHECKPOINT_H_
