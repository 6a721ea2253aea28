// Initial weights for a new training (the job's init_from): read from a ringleader checkpoint
// or a safetensors file (e.g. exported from PyTorch), checked against the model, then copied
// into it.
//
// Tensor names are PyTorch's state_dict names, shapes its shapes (export.h): fc1.weight
// [out, in], fc1.bias [out], ..., and the model's buffers (fc1.input_mean [in],
// fc1.input_mask [in]; a bool buffer is read as value != 0). Optimizer momentum buffers
// ("<parameter>.momentum_buffer", in ringleader checkpoints) are ignored: init_from starts a new
// training with fresh optimizer state, at step 0.
//
// Thread-safety: free functions; the model must not be used concurrently.
#ifndef RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_
#define RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

// The attribute under which ReadInitialWeights records the path it read, so that
// CheckInitialWeights' errors can name the file.
inline constexpr char kInitFromPathAttribute[] = "init_from.path";

// Reads `path` as a ringleader checkpoint if it starts with the magic "RLCKPT01" (the whole
// CheckpointData: step, fingerprint, attributes, tensors), or as a safetensors file if byte 8
// (the header's first byte) is '{' (tensors in file order, step 0, the "__metadata__" strings
// as attributes, no fingerprint). The content decides, whatever the extension; a file that
// looks like neither is read as safetensors if its name ends in ".safetensors" and as a
// checkpoint if it is a truncated start of the magic, so that their readers name the damage.
// The result's attributes[kInitFromPathAttribute] is `path`. A checkpoint is read as
// ReadCheckpoint reads it, never through a symbolic link at `path`; a safetensors file may be
// one (Hugging Face's cache links its files).
// Errors (naming the path): NOT_FOUND if missing; INVALID_ARGUMENT for a file that is neither
// format; otherwise ReadCheckpoint's or ReadSafetensorsFile's errors (DATA_LOSS for damaged
// files, INVALID_ARGUMENT for invalid ones, FAILED_PRECONDITION for a checkpoint that is a
// symbolic link, ...).
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

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_INITIAL_WEIGHTS_H_
