#include "worker/checkpoint/training_state.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

std::vector<uint64_t> Shape64(const std::vector<size_t>& shape) {
  return std::vector<uint64_t>(shape.begin(), shape.end());
}

absl::Status Mismatch(const std::string& name, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint does not match the model: tensor \"", name, "\" ", what,
      "; was it written for another model.layers?"));
}

}  // namespace

CheckpointData CaptureTrainingState(Mlp* model, const SgdOptimizer& optimizer, uint64_t step,
                                    uint64_t epoch, const std::string& spec_fingerprint) {
  CheckpointData data;
  data.step = step;
  data.epoch = epoch;
  data.spec_fingerprint = spec_fingerprint;
  const std::vector<ParameterInfo>& params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const float* p = model->param(i);
    data.tensors.push_back({params[i].name, Shape64(params[i].shape),
                            std::vector<float>(p, p + params[i].count)});
  }
  const std::vector<std::vector<float>>& buffers = optimizer.momentum_buffers();
  for (size_t i = 0; i < buffers.size() && i < params.size(); ++i) {
    if (buffers[i].empty()) continue;
    data.tensors.push_back(
        {MomentumBufferName(params[i].name), Shape64(params[i].shape), buffers[i]});
  }
  for (CheckpointTensor& t : CaptureBuffers(model->buffers())) data.tensors.push_back(std::move(t));
  return data;
}

std::vector<CheckpointTensor> CaptureBuffers(const std::vector<BufferInfo>& buffers) {
  std::vector<CheckpointTensor> out;
  for (const BufferInfo& b : buffers) {
    std::vector<float> values(b.count);
    if (b.type == BufferType::kFloat32) {
      const float* f = static_cast<const float*>(b.data);
      std::copy(f, f + b.count, values.begin());
    } else {
      const bool* f = static_cast<const bool*>(b.data);
      for (size_t k = 0; k < b.count; ++k) values[k] = f[k] ? 1.0f : 0.0f;
    }
    out.push_back({b.name, {b.count}, std::move(values)});
  }
  return out;
}

absl::Status RestoreTrainingState(const CheckpointData& data,
                                  const std::string& expected_fingerprint, Mlp* model,
                                  SgdOptimizer* optimizer) {
  if (!expected_fingerprint.empty() && data.spec_fingerprint != expected_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint was written by a job with spec fingerprint ", data.spec_fingerprint,
        ", this job's is ", expected_fingerprint, "; resume with the same job spec"));
  }
  // Validate everything first, so a mismatch leaves model and optimizer untouched.
  const std::vector<ParameterInfo>& params = model->parameters();
  std::vector<const CheckpointTensor*> found(params.size());
  std::vector<std::vector<float>> momentum(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    found[i] = data.FindTensor(params[i].name);
    if (found[i] == nullptr) return Mismatch(params[i].name, "is missing");
    if (found[i]->shape != Shape64(params[i].shape)) {
      return Mismatch(params[i].name,
                      absl::StrCat("has shape [", absl::StrJoin(found[i]->shape, ", "),
                                   "], the model's is [", absl::StrJoin(params[i].shape, ", "),
                                   "]"));
    }
    if (const CheckpointTensor* m = data.FindTensor(MomentumBufferName(params[i].name))) {
      if (m->data.size() != params[i].count) {
        return Mismatch(m->name, absl::StrCat("has ", m->data.size(), " values, expected ",
                                              params[i].count));
      }
      momentum[i] = m->data;
    }
  }
  std::vector<BufferInfo> buffers = model->buffers();
  std::vector<const CheckpointTensor*> found_buffers(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    found_buffers[b] = data.FindTensor(buffers[b].name);
    if (found_buffers[b] == nullptr) return Mismatch(buffers[b].name, "is missing");
    if (found_buffers[b]->data.size() != buffers[b].count) {
      return Mismatch(buffers[b].name, absl::StrCat("has ", found_buffers[b]->data.size(),
                                                    " values, expected ", buffers[b].count));
    }
  }
  absl::Status status = optimizer->RestoreMomentumBuffers(std::move(momentum));
  if (!status.ok()) return absl::FailedPreconditionError(status.message());
  optimizer->set_step_count(data.step);
  for (size_t i = 0; i < params.size(); ++i) {
    std::copy(found[i]->data.begin(), found[i]->data.end(), model->param(i));
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    const std::vector<float>& values = found_buffers[b]->data;
    if (buffers[b].type == BufferType::kFloat32) {
      std::copy(values.begin(), values.end(), static_cast<float*>(buffers[b].data));
    } else {
      bool* out = static_cast<bool*>(buffers[b].data);
      for (size_t k = 0; k < values.size(); ++k) out[k] = values[k] != 0.0f;
    }
  }
  return absl::OkStatus();
}

}  // namespace ringleader
