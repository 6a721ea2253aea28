// Converts between a training state (Mlp parameters and buffers, SgdOptimizer momentum buffers
// and step count) and CheckpointData, so writing and resuming a checkpoint is two calls.
//
// Tensor names: parameters by their own name ("fc1.weight"), momentum buffers by
// MomentumBufferName ("fc1.weight.momentum_buffer"), buffers by their name ("fc1.input_mean";
// bool buffers are stored as 0/1 floats).
#ifndef RINGLEADER_WORKER_CHECKPOINT_TRAINING_STATE_H_
#define RINGLEADER_WORKER_CHECKPOINT_TRAINING_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/checkpoint.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {

// The model buffers as checkpoint tensors, in order: shape [count], a bool buffer as 0/1 floats.
// `buffers` point at host memory.
std::vector<CheckpointTensor> CaptureBuffers(const std::vector<BufferInfo>& buffers);

// Copies the state into a CheckpointData (step, epoch, fingerprint as given). `model` is
// non-const only because Mlp::buffers() hands out writable views; nothing is changed.
CheckpointData CaptureTrainingState(Mlp* model, const SgdOptimizer& optimizer, uint64_t step,
                                    uint64_t epoch, const std::string& spec_fingerprint);

// Loads `data` into the model and the optimizer (step_count = data.step).
// If `expected_fingerprint` is non-empty it must equal data.spec_fingerprint.
// Errors: FAILED_PRECONDITION if the fingerprint differs, or a parameter / buffer is missing or
// has another shape than the model's (the message names the tensor: the checkpoint belongs to
// another model), or a momentum buffer has the wrong size. Nothing is changed on error.
absl::Status RestoreTrainingState(const CheckpointData& data,
                                  const std::string& expected_fingerprint, Mlp* model,
                                  SgdOptimizer* optimizer);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_TRAINING_STATE_H_
