// Models and checkpoints with known contents, for the tests of checkpoint formats.
#ifndef RINGLEADER_WORKER_CHECKPOINT_TEST_MODEL_H_
#define RINGLEADER_WORKER_CHECKPOINT_TEST_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

// An Mlp with parameters drawn from `seed` and, if `with_buffers`, buffers that differ from
// their defaults and depend on the seed: fc1.input_mean[k] = seed + k / 4, fc1.input_mask[k] =
// (k + seed) % 3 != 0.
std::unique_ptr<Mlp> MakeTestModel(std::vector<size_t> layers, uint64_t seed, bool with_buffers);

// Sets every parameter and buffer to a pattern another implementation can recompute exactly:
// parameter i (registration order), element k = (i + 1) + k / 4; fc1.input_mean[k] =
// -(k + 1) / 2; fc1.input_mask[k] = (k != 1).
void SetPatternValues(Mlp* model);

// CaptureTrainingState of `model` with an SGD optimizer (momentum 0.9) whose every parameter
// has a momentum buffer (element k = -k / 8): the checkpoint a job writes after training.
CheckpointData CaptureWithMomentum(Mlp* model, uint64_t step, const std::string& fingerprint);

// Every parameter, then every buffer (bool as 0/1), as floats.
std::vector<std::vector<float>> ModelValues(Mlp* model);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_TEST_MODEL_H_
