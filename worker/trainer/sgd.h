// Stochastic gradient descent with exactly torch.optim.SGD's semantics (momentum, dampening,
// weight decay, Nesterov), for parameters that live in host memory.
//
//   SgdOptions o; o.lr = 0.05; o.momentum = 0.9;
//   SgdOptimizer opt(model.parameters(), o);
//   ... model.ForwardBackward(...) ...
//   opt.Step(params, grads, has_grad);
//
// The per-element arithmetic lives in sgd_math.h so the GPU trainer applies the same update.
#ifndef RINGLEADER_WORKER_TRAINER_SGD_H_
#define RINGLEADER_WORKER_TRAINER_SGD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/parameter.h"
#include "worker/trainer/sgd_math.h"

namespace ringleader {

// torch.optim.SGD's options. Defaults are torch's, except lr (torch has none).
struct SgdOptions {
  double lr = 0.01;            // learning rate, > 0
  double momentum = 0.0;       // >= 0; 0 = plain SGD, no momentum buffers
  double dampening = 0.0;      // >= 0; scales the new gradient by (1 - dampening) in the buffer
  double weight_decay = 0.0;   // >= 0; L2 penalty added to the gradient
  bool nesterov = false;       // needs momentum > 0 and dampening == 0
};

// INVALID_ARGUMENT naming the field ("optimizer.learning_rate", "optimizer.momentum",
// "optimizer.dampening", "optimizer.weight_decay", "optimizer.nesterov") and the fix, like
// torch's constructor checks; OK otherwise.
absl::Status ValidateSgdOptions(const SgdOptions& options);

// The float hyper-parameters the per-element update (sgd_math.h) uses, on the host and in the
// GPU kernel alike.
SgdElementParams ToElementParams(const SgdOptions& options);

// strategy zero1's optimizer shard: INVALID_ARGUMENT ("optimizer shard: ...") unless `owned`
// has one range per parameter and each lies within its parameter's elements; OK otherwise.
// The CPU and GPU runners check ModelRunner::ShardOptimizerState's argument with it.
absl::Status CheckOptimizerShard(const std::vector<ParameterInfo>& params,
                                 const std::vector<ElementRange>& owned);

// Which elements of a restored momentum buffer of `buffer_size` elements an optimizer that steps
// `owned` of `param`'s elements keeps (indices into that buffer), for the CPU and GPU optimizers
// alike. Unsharded (`sharded` false, owned = the whole parameter) a buffer must be empty (none
// yet) or hold the whole parameter, and is kept whole. Sharded it may also hold the owned
// elements only (kept whole); a whole parameter's buffer (a checkpoint's) is cut to `owned`.
// An empty result: no buffer (an empty one, or a shard without elements of this parameter).
// INVALID_ARGUMENT naming the parameter for any other size.
absl::StatusOr<ElementRange> MomentumElementsToKeep(const ParameterInfo& param,
                                                    const ElementRange& owned, bool sharded,
                                                    size_t buffer_size);

// Owns the momentum buffers and the step count. Not thread-safe: one training thread uses it.
class SgdOptimizer {
 public:
  // `options` must pass ValidateSgdOptions (checked; aborts otherwise: validate the job spec
  // first).
  SgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options);
  // The optimizer of one rank under strategy zero1 (ZeRO-1, plan/shard_plan.h): it owns
  // only owned[i] of parameter i's elements (one entry per parameter, possibly empty; checked,
  // aborts otherwise). Step updates those elements only, with the very same per-element code as
  // the unsharded optimizer, and a momentum buffer holds owned[i].size() elements: the memory
  // saving. The other elements are left untouched (the caller all-gathers them from their
  // owners).
  SgdOptimizer(std::vector<ParameterInfo> params, SgdOptions options,
               std::vector<ElementRange> owned);

  // One optimizer step over every parameter i with has_grad[i] (others are skipped and keep
  // their momentum buffer untouched, like torch's `p.grad is None`). params[i] and grads[i]
  // point at parameters()[i].count floats; all three vectors have parameters().size() entries
  // (checked; aborts otherwise). A parameter's momentum buffer is created at its first step
  // with a gradient.
  void Step(const std::vector<float*>& params, const std::vector<const float*>& grads,
            const std::vector<bool>& has_grad);
  // The same step when only the owned elements' gradients exist (strategy zero2, whose
  // gradient shard holds nothing else): owned_grads[i] points at owned()[i].size() floats, the
  // gradient of elements owned()[i] (may be null where that range is empty). Element k of the
  // parameter is updated exactly as Step would with grads[i][k] == owned_grads[i][k - begin].
  void StepOwned(const std::vector<float*>& params, const std::vector<const float*>& owned_grads,
                 const std::vector<bool>& has_grad);

  // strategy fsdp, where a rank holds only its owned parameter elements: the same update as
  // StepOwned with owned_params[i] pointing at element owned()[i].begin (owned()[i].size()
  // floats; may be null where that range is empty).
  void StepShard(const std::vector<float*>& owned_params,
                 const std::vector<const float*>& owned_grads, const std::vector<bool>& has_grad);

  const std::vector<ParameterInfo>& parameters() const { return params_; }
  const SgdOptions& options() const { return options_; }
  // Per parameter, the elements this optimizer steps: [0, count) unless sharded.
  const std::vector<ElementRange>& owned() const { return owned_; }
  bool sharded() const { return sharded_; }
  // Momentum elements held (the sum of the buffers' sizes).
  size_t momentum_elements() const;
  // Changes the learning rate for later steps (schedules).
  void set_lr(double lr) { options_.lr = lr; }

  // One entry per parameter, in parameters() order; an entry is empty while that parameter has
  // no momentum buffer (momentum == 0, or no step with a gradient yet). Sharded: an entry holds
  // the owned elements only (owned()[i].size()).
  const std::vector<std::vector<float>>& momentum_buffers() const { return buffers_; }
  // The buffer of the parameter called `parameter_name`, or null if it has none.
  const std::vector<float>* momentum_buffer(const std::string& parameter_name) const;
  // Number of Step() calls so far.
  uint64_t step_count() const { return step_count_; }

  // Restores state saved from momentum_buffers() / step_count() (checkpoint resume).
  // INVALID_ARGUMENT if the number of entries differs from parameters().size() or a non-empty
  // entry's size differs from its parameter's count (the message names the parameter).
  // Sharded: each non-empty entry holds either the owned elements or the whole parameter's
  // (the checkpoint's form), of which the owned elements are kept.
  absl::Status RestoreMomentumBuffers(std::vector<std::vector<float>> buffers);
  // Sets one parameter's buffer by name. NOT_FOUND for an unknown name, INVALID_ARGUMENT for a
  // wrong size.
  absl::Status RestoreMomentumBuffer(const std::string& parameter_name, std::vector<float> buffer);
  void set_step_count(uint64_t step_count) { step_count_ = step_count; }

 private:
  // The part of a restored buffer of parameter i kept (MomentumElementsToKeep's range).
  static std::vector<float> Keep(const ElementRange& keep, std::vector<float> buffer);
  // Step, StepOwned, StepShard: grads[i] points at element owned()[i].begin's gradient when
  // `grads_at_owned`, else at element 0's; params[i] likewise with `params_at_owned`.
  void StepImpl(const std::vector<float*>& params, const std::vector<const float*>& grads,
                const std::vector<bool>& has_grad, bool grads_at_owned,
                bool params_at_owned = false);

  std::vector<ParameterInfo> params_;
  SgdOptions options_;
  std::vector<ElementRange> owned_;
  bool sharded_ = false;
  std::vector<std::vector<float>> buffers_;
  uint64_t step_count_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_SGD_H_
