// Initial weights for a new training (the job's init_from): read from a ringleader checkpoint
// or a safetensors file (e.g. exported from PyTorch), checked against the model, then copied
// into it.
//
// Tensor names are PyTorch's state_dict names, shapes its shapes (checkpoint/export.h): fc1.weight
// [out, in], fc1.bias [out], ..., and the model's buffers (fc1.input_mean [in],
// fc1.input_mask [in]; a bool buffer is read as value != 0). Optimizer momentum buffers
// ("<parameter>.momentum_buffer", in ringleader checkpoints) are ignored by LoadInitialWeights:
// init_from starts a new training with fresh optimizer state, at step 0, unless the job asks for
// the momentum too (model.init_optimizer_state: InitialMomentum). A checkpoint's momentum is
// whole (ddp's consolidated format, whatever strategy and world size wrote it), so a job of
// another world size or strategy takes it as it is, each rank keeping its owned slice. A
// sharded checkpoint's manifest (checkpoint/sharded_checkpoint.h) is read as the consolidated
// checkpoint its shards make (ConsolidateShards), so init_from may name a zero1/zero2 job's
// step-N.ckpt.
//
// Thread-safety: free functions; the model must not be used concurrently.
#ifndef RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_
#define RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

// The attribute under which ReadInitialWeights records the path it read, so that
// CheckInitialWeights' errors can name the file.
inline constexpr char kInitFromPathAttribute[] = "init_from.path";
// The attribute under which ReadInitialWeights records the format it read: kFormatCheckpoint or
// kFormatSafetensors.
inline constexpr char kInitFromFormatAttribute[] = "init_from.format";
inline constexpr char kFormatCheckpoint[] = "checkpoint";
inline constexpr char kFormatSafetensors[] = "safetensors";

// Reads `path` as a ringleader checkpoint if it starts with the magic "RLCKPT01" (the whole
// CheckpointData: step, fingerprint, attributes, tensors), or as a safetensors file if byte 8
// (the header's first byte) is '{' (tensors in file order, step 0, the "__metadata__" strings
// as attributes, no fingerprint). The content decides, whatever the extension; a file that
// looks like neither is read as safetensors if its name ends in ".safetensors" and as a
// checkpoint if it is a truncated start of the magic, so that their readers name the damage.
// The result's attributes[kInitFromPathAttribute] is `path`, attributes[kInitFromFormatAttribute]
// the format read. A checkpoint is read as
// ReadCheckpoint reads it, never through a symbolic link at `path`; a safetensors file may be
// one (Hugging Face's cache links its files). A checkpoint that is a sharded manifest
// (IsShardedManifest) is consolidated from its shards (ConsolidateShards: every shard read
// from the manifest's directory and checked against the manifest) and read as that
// consolidated checkpoint, with the manifest's step and fingerprint.
// Errors (naming the path): NOT_FOUND if missing; INVALID_ARGUMENT for a file that is neither
// format; otherwise ReadCheckpoint's or ReadSafetensorsFile's errors (DATA_LOSS for damaged
// files, INVALID_ARGUMENT for invalid ones, FAILED_PRECONDITION for a checkpoint that is a
// symbolic link, ...), and for a manifest ConsolidateShards' (NOT_FOUND naming a missing
// shard, DATA_LOSS "shard <path> ..." for a damaged or foreign shard or slices that do not
// tile their tensor, FAILED_PRECONDITION for an fsdp checkpoint).
absl::StatusOr<CheckpointData> ReadInitialWeights(const std::string& path);

// Checks that `weights` fit `model` exactly: every parameter and buffer of the model is there,
// with the model's shape (buffers: [count]), and every other tensor is a momentum buffer.
// Changes nothing (`model` is non-const only because Mlp::buffers() hands out writable views).
// Errors, prefixed "init_from <path>: " (the path from kInitFromPathAttribute, if any):
//   FAILED_PRECONDITION  "<name> has shape [256, 784] in the file but [128, 784] in the model",
//                        "<name> is missing from the file (the model's shape is [128])", or
//                        "the file has <name> (shape [10, 10]), which the model does not have";
//   INVALID_ARGUMENT     a tensor whose data size is not the product of its shape (weights
//                        built in memory; the readers never return one).
absl::Status CheckInitialWeights(const CheckpointData& weights, Mlp* model);

// CheckInitialWeights, then copies the parameters and buffers into `model`. Errors:
// CheckInitialWeights'; on error the model is unchanged.
absl::Status LoadInitialWeights(const CheckpointData& weights, Mlp* model);

// The SGD momentum of `weights` for model.init_optimizer_state: per parameter of `model`, in
// registration order, the tensor "<name>.momentum_buffer" (whole), or an empty entry where the
// file has none (a parameter that never got a gradient). The spec fingerprint is not compared:
// the job that wrote the file may have had another world size or strategy. Changes nothing.
// Errors, prefixed "init_from <path>: " (as CheckInitialWeights'), all FAILED_PRECONDITION:
//   "... is a safetensors file, which holds parameters only; ..."   (kInitFromFormatAttribute);
//   "... holds no optimizer momentum (no <parameter>.momentum_buffer tensor; was it written by
//   a job with optimizer.momentum 0?); ..."                         (none at all);
//   "fc1.weight.momentum_buffer has shape [..] in the file but the model's fc1.weight is [..]";
//   "the file has fc9.weight.momentum_buffer, for a parameter the model does not have".
absl::StatusOr<std::vector<std::vector<float>>> InitialMomentum(const CheckpointData& weights,
                                                                Mlp* model);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_
