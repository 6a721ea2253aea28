// A multi-layer perceptron for classification, trained on the CPU: Linear layers with ReLU
// between them and softmax cross-entropy (mean over the batch) at the end. The reference model
// of ringleader's data-parallel training; its math runs through OpenBLAS (cblas_sgemm).
//
//   layers {784, 256, 128, 10}:
//     x ──fc1──> relu ──fc2──> relu ──fc3──> logits ──softmax CE──> loss
//
// Parameters, in registration order (the order torch's model.parameters() would give):
//   fc1.weight [256, 784], fc1.bias [256], fc2.weight [128, 256], fc2.bias [128], ...
// Initialisation matches torch.nn.Linear's default bounds: every weight and bias element is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn in registration order from one std::mt19937_64
// seeded with `seed` (our own float conversion of the raw bits), so every rank and platform
// builds the same model from the same seed. The values differ from torch's for the same seed.
//
// Optional buffers (MlpOptions::with_buffers), to exercise buffer broadcast:
//   fc1.input_mean  float [in]: running mean of the input features, momentum 0.1 (like
//                   BatchNorm's running_mean, starts at 0), updated by ForwardBackward;
//   fc1.input_mask  bool  [in]: all true; the forward pass multiplies the input by it.
//
// Parameters: in storage the model owns, unless released (strategy fsdp keeps only shards,
// ReleaseParameters): each pass then takes every layer's weight and bias from a
// ParameterProvider (BackwardOptions::params_for, the Evaluate overload), the way slot_for
// supplies gradient slots.
//
// Gradients: by default in storage the model owns; BindGradients points them at memory the
// gradient reducer owns (bucket views), so backward writes straight into the buckets.
//
// Thread-safety: not thread-safe; one training thread owns an Mlp. Evaluate() is const and may
// run concurrently with other const calls.
#ifndef RINGLEADER_WORKER_TRAINER_MLP_H_
#define RINGLEADER_WORKER_TRAINER_MLP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/data/dataset.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct MlpOptions {
  bool with_buffers = false;  // add fc1.input_mean and fc1.input_mask (see above)
};

// One linear layer's parameters as a caller supplies them (strategy fsdp gathers them from their
// owners just before use, worker/sync/fsdp_parameters.h): weight [out, in] and bias [out],
// row-major, parameters()[2k] and [2k+1]'s counts.
struct LayerParameters {
  const float* weight = nullptr;
  const float* bias = nullptr;
};
// Layer k's parameters (0-based). The pointers must stay valid until the next call (a provider
// may release the previous layer's storage on each call). An error stops the pass and is
// returned by ForwardBackward / Evaluate unchanged.
using ParameterProvider = std::function<absl::StatusOr<LayerParameters>(size_t layer)>;

struct BackwardOptions {
  // Gradients accumulate loss_scale × dLoss/dW (e.g. 1/accumulation_steps).
  float loss_scale = 1.0f;
  // Called with parameter index i right after i's gradient is complete, last layer first, on
  // the calling thread. May be empty.
  std::function<void(size_t)> on_ready;
  // skip[i] = true: parameter i gets no gradient and no on_ready call (frozen / unused
  // parameter). Empty = skip nothing; otherwise one entry per parameter.
  std::vector<bool> skip;
  // Gradient slots handed out during backward (strategy zero2's bucket pool,
  // worker/sync/zero2_reducer.h). If set, called with parameter i just before backward first
  // writes i's gradient (never for a skipped parameter); it returns where i's gradient goes
  // (parameters()[i].count floats, non-null, alive at least until on_ready(i) returns), and
  // parameter i's slot is rebound there (grad(i) returns it) before backward accumulates into
  // it. Empty = the slots bound with BindGradients (ddp, zero1: nothing changes).
  std::function<float*(size_t)> slot_for;
  // Where the layers' parameters come from (strategy fsdp: the model holds none of its own,
  // ReleaseParameters). If set, it is called for layer k = 0, 1, ..., K-1 in forward, then in
  // backward for k = K-1, ..., 1 right before layer k's weight propagates the delta to layer
  // k-1 (layer 0's weight is not needed there; the bias never is): 2K - 1 calls per pass, the
  // same on every rank, so a provider may issue collectives. Empty = the model's own parameters
  // (ddp, zero1, zero2: nothing changes).
  ParameterProvider params_for;
};

class Mlp {
 public:
  // `layers` has at least two entries, all >= 1 (checked; aborts otherwise: validate the job
  // spec first — ValidateJobSpec does).
  explicit Mlp(std::vector<size_t> layers, uint64_t seed, MlpOptions opts = {});

  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const std::vector<size_t>& layers() const { return layers_; }
  size_t input_features() const { return layers_.front(); }
  size_t num_classes() const { return layers_.back(); }

  // Parameters in registration order.
  const std::vector<ParameterInfo>& parameters() const { return infos_; }
  // Sum of parameters()[i].count.
  size_t parameter_count() const { return total_params_; }
  // Null for every parameter after ReleaseParameters (until AdoptParameters).
  float* param(size_t i) { return params_[i].empty() ? nullptr : params_[i].data(); }
  const float* param(size_t i) const { return params_[i].empty() ? nullptr : params_[i].data(); }

  // strategy fsdp: frees the model's own parameter storage (the caller has copied out what it
  // keeps). From then on ForwardBackward needs BackwardOptions::params_for and evaluation the
  // provider overload of Evaluate (checked; aborts otherwise), until AdoptParameters.
  void ReleaseParameters();
  bool parameters_released() const { return released_; }
  // Gives the model full parameters again (one vector of parameters()[i].count floats per
  // parameter, checked; aborts otherwise): a checkpoint of an fsdp run captures them.
  void AdoptParameters(std::vector<std::vector<float>> params);

  // The current gradient slot of parameter i (internal storage or the bound slot).
  float* grad(size_t i) { return grad_slots_[i]; }
  const float* grad(size_t i) const { return grad_slots_[i]; }

  // Points parameter i's gradient at slots[i] (parameters()[i].count floats, owned by the
  // caller and alive while bound). An empty vector returns to internal storage (zeroed where
  // it had been released). The slots' contents are left as they are (call ZeroGradients to
  // clear them). Otherwise slots has one non-null entry per parameter (checked; aborts
  // otherwise), and the internal storage of every parameter bound elsewhere is released: a
  // model of P parameters would otherwise hold its gradients twice.
  void BindGradients(std::vector<float*> slots);

  // Releases the internal gradient storage of every parameter i with which[i] (one entry per
  // parameter, checked); its slot is then null until BackwardOptions::slot_for or
  // BindGradients gives it one. For callers that supply every slot per step (zero2).
  void ReleaseOwnGradients(const std::vector<bool>& which);

  // Sets every gradient slot to 0 (a null slot: nothing to clear).
  void ZeroGradients();

  // The buffers (empty unless with_buffers); data points into the model.
  std::vector<BufferInfo> buffers();

  // Forward + backward on `batch` examples (x: batch × input_features floats, y: batch labels).
  // Gradients are ACCUMULATED into the slots (grad += loss_scale × dLoss/dW), like torch's
  // .backward(). Backward runs last layer first (per layer: bias, then weight) and calls
  // opts.on_ready(i) as soon as parameter i's gradient is complete. Returns the mean loss over
  // the batch, unscaled (it may be inf/NaN if training diverged; the caller decides).
  // Errors: INVALID_ARGUMENT for batch == 0, a label outside [0, num_classes()) (naming the
  // example), or opts.skip with the wrong number of entries: nothing is changed. The error of
  // opts.params_for, returned as is: the gradients may then be partly accumulated.
  absl::StatusOr<double> ForwardBackward(const float* x, const int32_t* y, size_t batch,
                                         const BackwardOptions& opts);

  struct EvalResult {
    double loss = 0;      // mean cross-entropy
    double accuracy = 0;  // fraction of argmax(logits) == label
    size_t examples = 0;
  };
  // Loss and accuracy over all of `d`, in chunks of `batch` examples (0 = 256). Does not change
  // the model (buffers included). d.features must equal input_features() and labels must be in
  // range (checked; aborts otherwise — use CheckCompatible first for data from outside).
  EvalResult Evaluate(const Dataset& d, size_t batch) const;
  // The same with each layer's parameters from `params_for` (strategy fsdp), called once per
  // layer (in order) per chunk of `batch` examples — and once per layer for an empty `d`, so a
  // provider that issues collectives sees the same calls on every rank as long as every rank
  // makes the same number of chunks (pass batch >= d.size for one). Errors: the provider's.
  absl::StatusOr<EvalResult> Evaluate(const Dataset& d, size_t batch,
                                      const ParameterProvider& params_for) const;

  // INVALID_ARGUMENT if `d` does not fit this model (feature count, number of classes).
  absl::Status CheckCompatible(const Dataset& d) const;

 private:
  // Per-call scratch memory; sized for the largest batch seen.
  struct Workspace {
    std::vector<float> input;                     // masked input (with_buffers only)
    std::vector<std::vector<float>> activations;  // per layer output, batch × layers_[k+1]
    std::vector<float> delta;                     // dLoss/d(layer output)
    std::vector<float> delta_prev;
  };

  // Runs the layers on `x`; fills ws->activations (ReLU applied except on the logits). Returns
  // the pointer that was used as the first layer's input.
  // Layer k's parameters come from `params_for` when non-null, else the model's own. Errors:
  // the provider's.
  absl::StatusOr<const float*> Forward(const float* x, size_t batch, Workspace* ws,
                                       const ParameterProvider* params_for) const;
  absl::StatusOr<LayerParameters> LayerOf(size_t k, const ParameterProvider* params_for) const;
  absl::StatusOr<EvalResult> EvaluateImpl(const Dataset& d, size_t batch,
                                          const ParameterProvider* params_for) const;
  const bool* mask() const { return mask_.get(); }

  std::vector<size_t> layers_;
  MlpOptions opts_;
  std::vector<ParameterInfo> infos_;
  size_t total_params_ = 0;
  std::vector<std::vector<float>> params_;
  bool released_ = false;  // ReleaseParameters: params_ are empty
  std::vector<std::vector<float>> own_grads_;
  std::vector<float*> grad_slots_;
  std::vector<float> input_mean_;
  std::unique_ptr<bool[]> mask_;
  Workspace ws_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_MLP_H_
