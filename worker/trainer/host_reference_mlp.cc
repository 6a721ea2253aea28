#include "worker/trainer/host_reference_mlp.h"

#include <algorithm>
#include <utility>

#include "common/bf16.h"
#include "worker/trainer/mlp_math.h"

namespace ringleader {
namespace gpu {

HostReferenceMlp::HostReferenceMlp(const Mlp& initial, bool bf16)
    : layers_(initial.layers()), bf16_(bf16) {
  for (size_t i = 0; i < initial.parameters().size(); ++i) {
    const size_t n = initial.parameters()[i].count;
    params_.emplace_back(initial.param(i), initial.param(i) + n);
    grads_.emplace_back(n, 0.0f);
  }
}

void HostReferenceMlp::ZeroGradients() {
  for (std::vector<float>& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
}

float HostReferenceMlp::In(float v) const { return bf16_ ? Bf16ToFloat(FloatToBf16(v)) : v; }

double HostReferenceMlp::ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                         float loss_scale, std::vector<size_t>* ready_order) {
  const size_t num_linear = layers_.size() - 1;
  const size_t classes = layers_.back();
  std::vector<std::vector<float>> acts(num_linear);
  std::vector<float> input(x, x + batch * layers_[0]);
  for (size_t k = 0; k < num_linear; ++k) {
    const size_t in_w = layers_[k];
    const size_t out_w = layers_[k + 1];
    const std::vector<float>& in = k == 0 ? input : acts[k - 1];
    const std::vector<float>& w = params_[2 * k];
    const std::vector<float>& bias = params_[2 * k + 1];
    acts[k].assign(batch * out_w, 0.0f);
    for (size_t b = 0; b < batch; ++b) {
      for (size_t o = 0; o < out_w; ++o) {
        float acc = 0.0f;
        for (size_t i = 0; i < in_w; ++i) acc += In(in[b * in_w + i]) * In(w[o * in_w + i]);
        acts[k][b * out_w + o] = BiasActivation(acc, bias[o], k + 1 < num_linear);
      }
    }
  }
  const float scale = loss_scale / static_cast<float>(batch);
  std::vector<float> delta(batch * classes);
  double loss_sum = 0.0;
  for (size_t b = 0; b < batch; ++b) {
    loss_sum += SoftmaxCrossEntropyRow(acts.back().data() + b * classes, classes, y[b], scale,
                                       delta.data() + b * classes);
  }
  for (size_t k = num_linear; k-- > 0;) {
    const size_t in_w = layers_[k];
    const size_t out_w = layers_[k + 1];
    const std::vector<float>& in = k == 0 ? input : acts[k - 1];
    std::vector<float>& gb = grads_[2 * k + 1];
    for (size_t o = 0; o < out_w; ++o) gb[o] = BiasGradColumn(delta.data(), batch, out_w, o, gb[o]);
    if (ready_order != nullptr) ready_order->push_back(2 * k + 1);
    std::vector<float>& gw = grads_[2 * k];
    for (size_t o = 0; o < out_w; ++o) {
      for (size_t i = 0; i < in_w; ++i) {
        float acc = 0.0f;
        for (size_t b = 0; b < batch; ++b) acc += In(in[b * in_w + i]) * In(delta[b * out_w + o]);
        gw[o * in_w + i] += acc;
      }
    }
    if (ready_order != nullptr) ready_order->push_back(2 * k);
    if (k == 0) break;
    const std::vector<float>& w = params_[2 * k];
    std::vector<float> prev(batch * in_w);
    for (size_t b = 0; b < batch; ++b) {
      for (size_t i = 0; i < in_w; ++i) {
        float acc = 0.0f;
        for (size_t o = 0; o < out_w; ++o) acc += In(delta[b * out_w + o]) * In(w[o * in_w + i]);
        prev[b * in_w + i] = ReluBackward(acc, acts[k - 1][b * in_w + i]);
      }
    }
    delta = std::move(prev);
  }
  return loss_sum / static_cast<double>(batch);
}

}  // namespace gpu
}  // namespace ringleader
