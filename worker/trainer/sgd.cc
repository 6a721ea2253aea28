#include "worker/trainer/sgd.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

// Aborts with a message: the checks below guard against caller bugs, not bad input.
void CheckOrDie(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "SgdOptimizer: check failed: %s\n", what);
    std::abort();
  }
}

// SgdUpdateElement over a whole tensor with its loop-invariant branches taken out of the loop
// and the arrays declared unaliased, so the compiler vectorises it. The arithmetic is the
// element function's, operation for operation (no fused multiply-add in this build), so the
// results are bit-identical to it (sgd_test checks).
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void UpdateTensor(float* __restrict p, const float* __restrict g, float* __restrict b, size_t n,
                  const SgdElementParams& h) {
  const float wd = h.weight_decay, m = h.momentum, keep = 1.0f - h.dampening, lr = h.lr;
  for (size_t k = 0; k < n; ++k) {
    float d_p = g[k];
    if (kDecay) d_p = d_p + wd * p[k];
    if (kMomentum) {
      const float buf = kFirst ? d_p : m * b[k] + keep * d_p;
      b[k] = buf;
      d_p = kNesterov ? d_p + m * buf : buf;
    }
    p[k] = p[k] - lr * d_p;
  }
}

template <bool kDecay, bool kMomentum>
void UpdateTensor(float* p, const float* g, float* b, size_t n, bool first,
                  const SgdElementParams& h) {
  if (!kMomentum) return UpdateTensor<kDecay, false, false, false>(p, g, b, n, h);
  if (first) {
    return h.nesterov ? UpdateTensor<kDecay, true, true, true>(p, g, b, n, h)
                      : UpdateTensor<kDecay, true, true, false>(p, g, b, n, h);
  }
  return h.nesterov ? UpdateTensor<kDecay, true, false, true>(p, g, b, n, h)
                    : UpdateTensor<kDecay, true, false, false>(p, g, b, n, h);
}

void UpdateTensor(float* p, const float* g, float* b, size_t n, bool first,
                  const SgdElementParams& h) {
  const bool decay = h.weight_decay != 0.0f, momentum = h.momentum != 0.0f;
  if (decay) {
    return momentum ? UpdateTensor<true, true>(p, g, b, n, first, h)
                    : UpdateTensor<true, false>(p, g, b, n, first, h);
  }
  return momentum ? UpdateTensor<false, true>(p, g, b, n, first, h)
                  : UpdateTensor<false, false>(p, g, b, n, first, h);
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

absl::Status CheckOptimizerShard(const std::vector<ParameterInfo>& params,
                                 const std::vector<ElementRange>& owned) {
  if (owned.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer shard: ", owned.size(),
                                                   " ranges for ", params.size(), " parameters"));
  }
  for (size_t i = 0; i < owned.size(); ++i) {
    if (owned[i].begin > owned[i].end || owned[i].end > params[i].count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer shard: range [", owned[i].begin, ", ", owned[i].end, ") of ",
          params[i].name, " lies outside its ", params[i].count, " elements"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ElementRange> MomentumElementsToKeep(const ParameterInfo& param,
                                                    const ElementRange& owned, bool sharded,
                                                    size_t buffer_size) {
  if (buffer_size == 0) return ElementRange{};
  // The shard's own form first (the same whole range when the shard is the whole parameter).
  if (sharded && buffer_size == owned.size()) return ElementRange{0, buffer_size};
  if (buffer_size == param.count) {
    // Unsharded, owned is [0, count): the whole buffer. Sharded: the owned elements of a whole
    // parameter's buffer; none for an empty shard (that rank never steps the parameter).
    if (owned.empty()) return ElementRange{};
    return owned;
  }
  if (sharded) {
    return absl::InvalidArgumentError(absl::StrCat(
        "momentum buffer of ", param.name, ": got ", buffer_size, " elements, the parameter has ",
        param.count, " and this rank's shard of it ", owned.size()));
  }
  return absl::InvalidArgumentError(absl::StrCat("momentum buffer of ", param.name, ": got ",
                                                 buffer_size, " elements, the parameter has ",
                                                 param.count));
}

SgdOptimizer::SgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options)
    : params_(std::move(params)), options_(options), buffers_(params_.size()) {
  CheckOrDie(ValidateSgdOptions(options_).ok(), "options pass ValidateSgdOptions");
  for (const ParameterInfo& p : params_) owned_.push_back(ElementRange{0, p.count});
}

SgdOptimizer::SgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options,
                           std::vector<ElementRange> owned)
    : params_(std::move(params)),
      options_(options),
      owned_(std::move(owned)),
      sharded_(true),
      buffers_(params_.size()) {
  CheckOrDie(ValidateSgdOptions(options_).ok(), "options pass ValidateSgdOptions");
  CheckOrDie(owned_.size() == params_.size(), "owned.size() == parameters().size()");
  for (size_t i = 0; i < params_.size(); ++i) {
    CheckOrDie(owned_[i].begin <= owned_[i].end && owned_[i].end <= params_[i].count,
               "owned[i] lies within parameter i");
  }
}

size_t SgdOptimizer::momentum_elements() const {
  size_t n = 0;
  for (const std::vector<float>& b : buffers_) n += b.size();
  return n;
}

void SgdOptimizer::Step(const std::vector<float*>& params,
                        const std::vector<const float*>& grads,
                        const std::vector<bool>& has_grad) {
  StepImpl(params, grads, has_grad, /*grads_at_owned=*/false);
}

void SgdOptimizer::StepOwned(const std::vector<float*>& params,
                             const std::vector<const float*>& owned_grads,
                             const std::vector<bool>& has_grad) {
  StepImpl(params, owned_grads, has_grad, /*grads_at_owned=*/true);
}

void SgdOptimizer::StepShard(const std::vector<float*>& owned_params,
                             const std::vector<const float*>& owned_grads,
                             const std::vector<bool>& has_grad) {
  StepImpl(owned_params, owned_grads, has_grad, /*grads_at_owned=*/true,
           /*params_at_owned=*/true);
}

void SgdOptimizer::StepImpl(const std::vector<float*>& params,
                            const std::vector<const float*>& grads,
                            const std::vector<bool>& has_grad, bool grads_at_owned,
                            bool params_at_owned) {
  CheckOrDie(params.size() == params_.size(), "params.size() == parameters().size()");
  CheckOrDie(grads.size() == params_.size(), "grads.size() == parameters().size()");
  CheckOrDie(has_grad.size() == params_.size(), "has_grad.size() == parameters().size()");
  const SgdElementParams h = ToElementParams(options_);
  const bool use_momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad[i] || owned_[i].empty()) continue;
    // Sharded, only the owned elements: the same element-wise update on a sub-range (the
    // update of element k reads and writes element k only), so each owned element ends exactly
    // as the unsharded optimizer leaves it.
    const size_t n = owned_[i].size();
    float* p = params_at_owned ? params[i] : params[i] + owned_[i].begin;
    const float* g = grads_at_owned ? grads[i] : grads[i] + owned_[i].begin;
    if (!use_momentum) {
      UpdateTensor(p, g, nullptr, n, true, h);
      continue;
    }
    std::vector<float>& buf = buffers_[i];
    const bool first = buf.empty();
    if (first) buf.resize(n);
    UpdateTensor(p, g, buf.data(), n, first, h);
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
  std::vector<ElementRange> keep(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    ASSIGN_OR_RETURN(keep[i],
                     MomentumElementsToKeep(params_[i], owned_[i], sharded_, buffers[i].size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) buffers_[i] = Keep(keep[i], std::move(buffers[i]));
  return absl::OkStatus();
}

std::vector<float> SgdOptimizer::Keep(const ElementRange& keep, std::vector<float> buffer) {
  if (keep.empty()) return {};
  if (keep.begin == 0 && keep.end == buffer.size()) return buffer;
  // A whole parameter's buffer (a checkpoint's) cut to the owned elements.
  return std::vector<float>(buffer.begin() + keep.begin, buffer.begin() + keep.end);
}

absl::Status SgdOptimizer::RestoreMomentumBuffer(const std::string& parameter_name,
                                                 std::vector<float> buffer) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name != parameter_name) continue;
    ASSIGN_OR_RETURN(const ElementRange keep,
                     MomentumElementsToKeep(params_[i], owned_[i], sharded_, buffer.size()));
    buffers_[i] = Keep(keep, std::move(buffer));
    return absl::OkStatus();
  }
  return absl::NotFoundError(
      absl::StrCat("momentum buffer: no parameter named \"", parameter_name, "\""));
}

}  // namespace ringleader
