#include "worker/trainer/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

constexpr float kInputMeanMomentum = 0.1f;

void CheckOrDie(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "Mlp: check failed: %s\n", what);
    std::abort();
  }
}

// Uniform in [0, 1) from the top 53 bits: the same value on every platform, unlike
// std::uniform_real_distribution whose algorithm is implementation-defined.
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

// out[b, :] = in[b, :] · W^T + bias, for a row-major batch.
void LinearForward(const float* in, size_t batch, size_t fan_in, size_t fan_out, const float* w,
                   const float* bias, float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(batch),
              static_cast<int>(fan_out), static_cast<int>(fan_in), 1.0f, in,
              static_cast<int>(fan_in), w, static_cast<int>(fan_in), 0.0f, out,
              static_cast<int>(fan_out));
  for (size_t b = 0; b < batch; ++b) {
    float* row = out + b * fan_out;
    for (size_t j = 0; j < fan_out; ++j) row[j] += bias[j];
  }
}

void ReluInPlace(float* v, size_t n) {
  for (size_t i = 0; i < n; ++i) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
}

// Cross-entropy of one row of logits against `label`, in double (log-sum-exp with the max
// subtracted for stability). Writes softmax probabilities into `probs` if non-null.
double RowCrossEntropy(const float* logits, size_t classes, int32_t label, float* probs) {
  float max = logits[0];
  for (size_t j = 1; j < classes; ++j) max = std::max(max, logits[j]);
  double sum = 0.0;
  for (size_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(logits[j]) - max);
  if (probs != nullptr) {
    for (size_t j = 0; j < classes; ++j) {
      probs[j] = static_cast<float>(std::exp(static_cast<double>(logits[j]) - max) / sum);
    }
  }
  return static_cast<double>(max) + std::log(sum) - static_cast<double>(logits[label]);
}

float* TakeSlot(const BackwardOptions& opts, size_t i) {
  float* slot = opts.slot_for(i);
  CheckOrDie(slot != nullptr, "BackwardOptions::slot_for returned a null slot");
  return slot;
}

}  // namespace

Mlp::Mlp(std::vector<size_t> layers, uint64_t seed, MlpOptions opts)
    : layers_(std::move(layers)), opts_(opts) {
  CheckOrDie(layers_.size() >= 2, "at least two layer sizes (input and output)");
  for (size_t width : layers_) CheckOrDie(width >= 1, "every layer size >= 1");
  std::mt19937_64 rng(seed);
  for (size_t k = 0; k + 1 < layers_.size(); ++k) {
    const size_t fan_in = layers_[k];
    const size_t fan_out = layers_[k + 1];
    const std::string prefix = absl::StrCat("fc", k + 1);
    infos_.push_back({prefix + ".weight", {fan_out, fan_in}, fan_out * fan_in});
    infos_.push_back({prefix + ".bias", {fan_out}, fan_out});
    // torch.nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) gives bound
    // sqrt(6 / ((1 + 5) fan_in)) = 1/sqrt(fan_in) for the weight; the bias uses 1/sqrt(fan_in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (size_t p = infos_.size() - 2; p < infos_.size(); ++p) {
      std::vector<float> values(infos_[p].count);
      for (float& v : values) v = static_cast<float>(bound * (2.0 * Uniform01(rng) - 1.0));
      params_.push_back(std::move(values));
    }
  }
  for (const ParameterInfo& info : infos_) {
    total_params_ += info.count;
    own_grads_.emplace_back(info.count, 0.0f);
  }
  BindGradients({});
  if (opts_.with_buffers) {
    input_mean_.assign(layers_[0], 0.0f);
    mask_.reset(new bool[layers_[0]]);
    std::fill(mask_.get(), mask_.get() + layers_[0], true);
  }
}

void Mlp::ReleaseParameters() {
  for (std::vector<float>& p : params_) std::vector<float>().swap(p);
  released_ = true;
}

void Mlp::AdoptParameters(std::vector<std::vector<float>> params) {
  CheckOrDie(params.size() == infos_.size(), "AdoptParameters: one vector per parameter");
  for (size_t i = 0; i < infos_.size(); ++i) {
    CheckOrDie(params[i].size() == infos_[i].count, "AdoptParameters: parameters()[i].count");
  }
  params_ = std::move(params);
  released_ = false;
}

absl::StatusOr<LayerParameters> Mlp::LayerOf(size_t k, const ParameterProvider* params_for) const {
  if (params_for == nullptr) {
    CheckOrDie(!released_, "released parameters need a ParameterProvider (params_for)");
    return LayerParameters{params_[2 * k].data(), params_[2 * k + 1].data()};
  }
  absl::StatusOr<LayerParameters> layer = (*params_for)(k);
  if (layer.ok()) {
    CheckOrDie(layer->weight != nullptr && layer->bias != nullptr,
               "a ParameterProvider returned a null weight or bias");
  }
  return layer;
}

void Mlp::BindGradients(std::vector<float*> slots) {
  if (slots.empty()) {
    grad_slots_.clear();
    for (size_t i = 0; i < infos_.size(); ++i) {
      if (own_grads_[i].size() != infos_[i].count) own_grads_[i].assign(infos_[i].count, 0.0f);
      grad_slots_.push_back(own_grads_[i].data());
    }
    return;
  }
  CheckOrDie(slots.size() == infos_.size(), "BindGradients: one slot per parameter");
  for (float* s : slots) CheckOrDie(s != nullptr, "BindGradients: non-null slots");
  grad_slots_ = std::move(slots);
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (grad_slots_[i] != own_grads_[i].data()) std::vector<float>().swap(own_grads_[i]);
  }
}

void Mlp::ReleaseOwnGradients(const std::vector<bool>& which) {
  CheckOrDie(which.size() == infos_.size(), "ReleaseOwnGradients: one entry per parameter");
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!which[i]) continue;
    if (grad_slots_[i] == own_grads_[i].data()) grad_slots_[i] = nullptr;
    std::vector<float>().swap(own_grads_[i]);
  }
}

void Mlp::ZeroGradients() {
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (grad_slots_[i] != nullptr) std::fill_n(grad_slots_[i], infos_[i].count, 0.0f);
  }
}

std::vector<BufferInfo> Mlp::buffers() {
  std::vector<BufferInfo> out;
  if (!opts_.with_buffers) return out;
  out.push_back({"fc1.input_mean", BufferType::kFloat32, input_mean_.size(), input_mean_.data()});
  out.push_back({"fc1.input_mask", BufferType::kBool, layers_[0], mask_.get()});
  return out;
}

absl::Status Mlp::CheckCompatible(const Dataset& d) const {
  if (d.features != input_features()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers: the first layer has ", input_features(), " inputs but the data set has ",
        d.features, " features per example; make model.layers start with ", d.features));
  }
  if (d.num_classes > 0 && static_cast<size_t>(d.num_classes) != num_classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers: the last layer has ", num_classes(), " outputs but the data set has ",
        d.num_classes, " classes; make model.layers end with ", d.num_classes));
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> Mlp::Forward(const float* x, size_t batch, Workspace* ws,
                                          const ParameterProvider* params_for) const {
  const size_t num_linear = layers_.size() - 1;
  const float* in = x;
  if (opts_.with_buffers) {
    // The mask is bool; multiplying by it (rather than skipping masked features) keeps the math
    // identical to `x * mask` in torch.
    const size_t f = layers_[0];
    ws->input.resize(batch * f);
    const bool* m = mask();
    for (size_t b = 0; b < batch; ++b) {
      for (size_t j = 0; j < f; ++j) ws->input[b * f + j] = x[b * f + j] * (m[j] ? 1.0f : 0.0f);
    }
    in = ws->input.data();
  }
  ws->activations.resize(num_linear);
  const float* layer_in = in;
  for (size_t k = 0; k < num_linear; ++k) {
    std::vector<float>& out = ws->activations[k];
    out.resize(batch * layers_[k + 1]);
    absl::StatusOr<LayerParameters> layer = LayerOf(k, params_for);
    if (!layer.ok()) return layer.status();
    LinearForward(layer_in, batch, layers_[k], layers_[k + 1], layer->weight, layer->bias,
                  out.data());
    if (k + 1 < num_linear) ReluInPlace(out.data(), out.size());
    layer_in = out.data();
  }
  return in;
}

absl::StatusOr<double> Mlp::ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                            const BackwardOptions& opts) {
  if (batch == 0) return absl::InvalidArgumentError("ForwardBackward: batch is empty");
  if (!opts.skip.empty() && opts.skip.size() != infos_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ForwardBackward: skip has ",
                                                   opts.skip.size(), " entries, the model has ",
                                                   infos_.size(), " parameters"));
  }
  const size_t classes = num_classes();
  for (size_t b = 0; b < batch; ++b) {
    if (y[b] < 0 || static_cast<size_t>(y[b]) >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("ForwardBackward: label ", y[b],
                                                     " of example ", b, " is outside [0, ",
                                                     classes, ")"));
    }
  }
  const auto skipped = [&](size_t i) { return !opts.skip.empty() && opts.skip[i]; };

  if (opts_.with_buffers) {
    const size_t f = layers_[0];
    for (size_t j = 0; j < f; ++j) {
      double sum = 0.0;
      for (size_t b = 0; b < batch; ++b) sum += x[b * f + j];
      const float mean = static_cast<float>(sum / static_cast<double>(batch));
      input_mean_[j] = (1.0f - kInputMeanMomentum) * input_mean_[j] + kInputMeanMomentum * mean;
    }
  }

  const ParameterProvider* params_for = opts.params_for ? &opts.params_for : nullptr;
  Workspace& ws = ws_;
  absl::StatusOr<const float*> forward_input = Forward(x, batch, &ws, params_for);
  if (!forward_input.ok()) return forward_input.status();
  const float* input = *forward_input;
  const size_t num_linear = layers_.size() - 1;

  // Loss and dLoss/dlogits = (softmax - onehot) / batch, scaled.
  std::vector<float>& logits = ws.activations[num_linear - 1];
  ws.delta.resize(batch * classes);
  double loss_sum = 0.0;
  const float scale = opts.loss_scale / static_cast<float>(batch);
  for (size_t b = 0; b < batch; ++b) {
    float* d = ws.delta.data() + b * classes;
    loss_sum += RowCrossEntropy(logits.data() + b * classes, classes, y[b], d);
    d[y[b]] -= 1.0f;
    for (size_t j = 0; j < classes; ++j) d[j] *= scale;
  }

  // Backward, last layer first. The bias and weight gradients of layer k are finished before
  // the delta for layer k-1 is computed, so on_ready fires as early as possible.
  for (size_t k = num_linear; k-- > 0;) {
    const size_t fan_in = layers_[k];
    const size_t fan_out = layers_[k + 1];
    const float* layer_in = k == 0 ? input : ws.activations[k - 1].data();
    const size_t w_index = 2 * k;
    const size_t b_index = 2 * k + 1;
    if (!skipped(b_index)) {
      if (opts.slot_for) grad_slots_[b_index] = TakeSlot(opts, b_index);
      CheckOrDie(grad_slots_[b_index] != nullptr, "a released gradient needs BackwardOptions::slot_for");
      float* gb = grad_slots_[b_index];
      for (size_t b = 0; b < batch; ++b) {
        const float* d = ws.delta.data() + b * fan_out;
        for (size_t j = 0; j < fan_out; ++j) gb[j] += d[j];
      }
      if (opts.on_ready) opts.on_ready(b_index);
    }
    if (!skipped(w_index)) {
      if (opts.slot_for) grad_slots_[w_index] = TakeSlot(opts, w_index);
      CheckOrDie(grad_slots_[w_index] != nullptr, "a released gradient needs BackwardOptions::slot_for");
      // gW[out, in] += delta^T[out, batch] · layer_in[batch, in]  (beta = 1: accumulate)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(fan_out),
                  static_cast<int>(fan_in), static_cast<int>(batch), 1.0f, ws.delta.data(),
                  static_cast<int>(fan_out), layer_in, static_cast<int>(fan_in), 1.0f,
                  grad_slots_[w_index], static_cast<int>(fan_in));
      if (opts.on_ready) opts.on_ready(w_index);
    }
    if (k == 0) break;  // no gradient for the input
    // delta_prev[batch, in] = delta[batch, out] · W[out, in], then through the ReLU.
    absl::StatusOr<LayerParameters> layer = LayerOf(k, params_for);
    if (!layer.ok()) return layer.status();
    ws.delta_prev.resize(batch * fan_in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(batch),
                static_cast<int>(fan_in), static_cast<int>(fan_out), 1.0f, ws.delta.data(),
                static_cast<int>(fan_out), layer->weight, static_cast<int>(fan_in),
                0.0f, ws.delta_prev.data(), static_cast<int>(fan_in));
    const float* act = ws.activations[k - 1].data();
    for (size_t i = 0; i < batch * fan_in; ++i) {
      if (!(act[i] > 0.0f)) ws.delta_prev[i] = 0.0f;
    }
    std::swap(ws.delta, ws.delta_prev);
  }
  return loss_sum / static_cast<double>(batch);
}

Mlp::EvalResult Mlp::Evaluate(const Dataset& d, size_t batch) const {
  absl::StatusOr<EvalResult> result = EvaluateImpl(d, batch, nullptr);
  CheckOrDie(result.ok(), "Evaluate: no provider, no error");
  return *result;
}

absl::StatusOr<Mlp::EvalResult> Mlp::Evaluate(const Dataset& d, size_t batch,
                                              const ParameterProvider& params_for) const {
  CheckOrDie(static_cast<bool>(params_for), "Evaluate: a non-empty ParameterProvider");
  return EvaluateImpl(d, batch, &params_for);
}

absl::StatusOr<Mlp::EvalResult> Mlp::EvaluateImpl(const Dataset& d, size_t batch,
                                                  const ParameterProvider* params_for) const {
  CheckOrDie(CheckCompatible(d).ok(), "Evaluate: data set fits the model (CheckCompatible)");
  if (d.size == 0 && params_for != nullptr) {
    // The same provider calls as a rank with examples makes for one chunk.
    for (size_t k = 0; k + 1 < layers_.size(); ++k) {
      absl::StatusOr<LayerParameters> layer = LayerOf(k, params_for);
      if (!layer.ok()) return layer.status();
    }
  }
  if (batch == 0) batch = 256;
  const size_t classes = num_classes();
  Workspace ws;
  EvalResult result;
  double loss_sum = 0.0;
  size_t correct = 0;
  for (size_t start = 0; start < d.size; start += batch) {
    const size_t n = std::min(batch, d.size - start);
    absl::StatusOr<const float*> forward = Forward(d.example(start), n, &ws, params_for);
    if (!forward.ok()) return forward.status();
    const std::vector<float>& logits = ws.activations.back();
    for (size_t b = 0; b < n; ++b) {
      const int32_t label = d.y[start + b];
      CheckOrDie(label >= 0 && static_cast<size_t>(label) < classes, "Evaluate: labels in range");
      const float* row = logits.data() + b * classes;
      loss_sum += RowCrossEntropy(row, classes, label, nullptr);
      // First maximum wins, as torch.argmax.
      const size_t predicted = static_cast<size_t>(std::max_element(row, row + classes) - row);
      if (predicted == static_cast<size_t>(label)) ++correct;
    }
  }
  result.examples = d.size;
  if (d.size > 0) {
    result.loss = loss_sum / static_cast<double>(d.size);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(d.size);
  }
  return result;
}

}  // namespace ringleader
