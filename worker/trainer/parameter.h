// Named parameters and buffers of a model, as the gradient reducer, the drift check and the
// checkpoint see them. The reducer may own the gradient memory (bucket views): the model then
// writes each parameter's gradient into the slot the reducer gave it.
#ifndef RINGLEADER_WORKER_TRAINER_PARAMETER_H_
#define RINGLEADER_WORKER_TRAINER_PARAMETER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "plan/element_range.h"

namespace ringleader {

// One parameter tensor, in registration order (fc1.weight, fc1.bias, fc2.weight, ...).
struct ParameterInfo {
  std::string name;
  std::vector<size_t> shape;
  size_t count = 0;  // product of shape
};

enum class BufferType { kFloat32, kBool };

// One buffer tensor (not trained; e.g. running statistics, a boolean mask).
struct BufferInfo {
  std::string name;
  BufferType type = BufferType::kFloat32;
  size_t count = 0;
  void* data = nullptr;  // float* or bool*, owned by the model
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_PARAMETER_H_
