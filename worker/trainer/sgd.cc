#include "worker/trainer/sgd.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

// Aborts with a message: the checks below guard against caller bugs, not bad input.
void CheckOrDie(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "SgdOptimizer: check failed: %s\n", what);
    std::abort();
  }
}

}  // namespace

absl::Status ValidateSgdOptions(const SgdOptions& o) {
  // Same conditions as torch.optim.SGD.__init__ (and lr must be positive to make progress).
  if (!(o.lr > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.learning_rate: must be > 0, got ", o.lr, "; set a positive learning rate"));
  }
  if (!(o.momentum >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.momentum: must be >= 0, got ", o.momentum));
  }
  if (!(o.dampening >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.dampening: must be >= 0, got ", o.dampening));
  }
  if (!(o.weight_decay >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.weight_decay: must be >= 0, got ", o.weight_decay));
  }
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
    return absl::InvalidArgumentError(
        "optimizer.nesterov: Nesterov momentum requires momentum > 0 and dampening = 0; "
        "set optimizer.momentum or turn nesterov off");
  }
  return absl::OkStatus();
}

SgdElementParams ToElementParams(const SgdOptions& options) {
  SgdElementParams h;
  h.lr = static_cast<float>(options.lr);
  h.momentum = static_cast<float>(options.momentum);
  h.dampening = static_cast<float>(options.dampening);
  h.weight_decay = static_cast<float>(options.weight_decay);
  h.nesterov = options.nesterov;
  return h;
}

std::string MomentumBufferName(const std::string& parameter_name) {
  return absl::StrCat(parameter_name, ".momentum_buffer");
}

SgdOptimizer::SgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options)
    : params_(std::move(params)), options_(options), buffers_(params_.size()) {
  CheckOrDie(ValidateSgdOptions(options_).ok(), "options pass ValidateSgdOptions");
}

void SgdOptimizer::Step(const std::vector<float*>& params,
                        const std::vector<const float*>& grads,
                        const std::vector<bool>& has_grad) {
  CheckOrDie(params.size() == params_.size(), "params.size() == parameters().size()");
  CheckOrDie(grads.size() == params_.size(), "grads.size() == parameters().size()");
  CheckOrDie(has_grad.size() == params_.size(), "has_grad.size() == parameters().size()");
  const SgdElementParams h = ToElementParams(options_);
  const bool use_momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad[i]) continue;
    const size_t n = params_[i].count;
    float* p = params[i];
    const float* g = grads[i];
    if (!use_momentum) {
      for (size_t k = 0; k < n; ++k) SgdUpdateElement(&p[k], g[k], nullptr, true, h);
      continue;
    }
    std::vector<float>& buf = buffers_[i];
    const bool first = buf.empty();
    if (first) buf.resize(n);
    float* b = buf.data();
    for (size_t k = 0; k < n; ++k) SgdUpdateElement(&p[k], g[k], &b[k], first, h);
  }
  ++step_count_;
}

const std::vector<float>* SgdOptimizer::momentum_buffer(const std::string& parameter_name) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == parameter_name) return buffers_[i].empty() ? nullptr : &buffers_[i];
  }
  return nullptr;
}

absl::Status SgdOptimizer::RestoreMomentumBuffers(std::vector<std::vector<float>> buffers) {
  if (buffers.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("momentum buffers: got ", buffers.size(),
                                                   " entries, the model has ", params_.size(),
                                                   " parameters"));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!buffers[i].empty() && buffers[i].size() != params_[i].count) {
      return absl::InvalidArgumentError(
          absl::StrCat("momentum buffer of ", params_[i].name, ": got ", buffers[i].size(),
                       " elements, the parameter has ", params_[i].count));
    }
  }
  buffers_ = std::move(buffers);
  return absl::OkStatus();
}

absl::Status SgdOptimizer::RestoreMomentumBuffer(const std::string& parameter_name,
                                                 std::vector<float> buffer) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name != parameter_name) continue;
    if (!buffer.empty() && buffer.size() != params_[i].count) {
      return absl::InvalidArgumentError(
          absl::StrCat("momentum buffer of ", parameter_name, ": got ", buffer.size(),
                       " elements, the parameter has ", params_[i].count));
    }
    buffers_[i] = std::move(buffer);
    return absl::OkStatus();
  }
  return absl::NotFoundError(
      absl::StrCat("momentum buffer: no parameter named \"", parameter_name, "\""));
}

}  // namespace ringleader
