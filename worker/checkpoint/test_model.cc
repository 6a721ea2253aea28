#include "worker/checkpoint/test_model.h"

#include <cstdlib>
#include <iostream>
#include <utility>

#include "worker/checkpoint/training_state.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

void SetBuffers(Mlp* model, float mean_base, uint64_t mask_offset) {
  for (const BufferInfo& b : model->buffers()) {
    for (size_t k = 0; k < b.count; ++k) {
      if (b.type == BufferType::kFloat32) {
        static_cast<float*>(b.data)[k] = mean_base + 0.25f * static_cast<float>(k);
      } else {
        static_cast<bool*>(b.data)[k] = (k + mask_offset) % 3 != 0;
      }
    }
  }
}

}  // namespace

std::unique_ptr<Mlp> MakeTestModel(std::vector<size_t> layers, uint64_t seed, bool with_buffers) {
  MlpOptions options;
  options.with_buffers = with_buffers;
  auto model = std::make_unique<Mlp>(std::move(layers), seed, options);
  SetBuffers(model.get(), static_cast<float>(seed), seed);
  return model;
}

void SetPatternValues(Mlp* model) {
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    for (size_t k = 0; k < model->parameters()[i].count; ++k) {
      model->param(i)[k] = static_cast<float>(i + 1) + 0.25f * static_cast<float>(k);
    }
  }
  for (const BufferInfo& b : model->buffers()) {
    for (size_t k = 0; k < b.count; ++k) {
      if (b.type == BufferType::kFloat32) {
        static_cast<float*>(b.data)[k] = -0.5f * static_cast<float>(k + 1);
      } else {
        static_cast<bool*>(b.data)[k] = k != 1;
      }
    }
  }
}

CheckpointData CaptureWithMomentum(Mlp* model, uint64_t step, const std::string& fingerprint) {
  SgdOptions options;
  options.momentum = 0.9;
  SgdOptimizer optimizer(model->parameters(), options);
  for (const ParameterInfo& p : model->parameters()) {
    std::vector<float> momentum(p.count);
    for (size_t k = 0; k < p.count; ++k) momentum[k] = -0.125f * static_cast<float>(k);
    const absl::Status status = optimizer.RestoreMomentumBuffer(p.name, std::move(momentum));
    if (!status.ok()) {
      std::cerr << "CaptureWithMomentum: " << status << "\n";
      std::abort();
    }
  }
  return CaptureTrainingState(model, optimizer, step, /*epoch=*/1, fingerprint);
}

std::vector<std::vector<float>> ModelValues(Mlp* model) {
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    values.emplace_back(model->param(i), model->param(i) + model->parameters()[i].count);
  }
  for (const BufferInfo& b : model->buffers()) {
    std::vector<float> v(b.count);
    for (size_t k = 0; k < b.count; ++k) {
      v[k] = b.type == BufferType::kFloat32 ? static_cast<const float*>(b.data)[k]
                                            : (static_cast<const bool*>(b.data)[k] ? 1.0f : 0.0f);
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace ringleader
