// The ModelRunner of the CPU trainer: an Mlp and an SgdOptimizer in host memory. Every call is
// the Mlp / SgdOptimizer / norm.h call the training loop made before runners existed, so gloo
// jobs compute exactly what they did.
#ifndef RINGLEADER_WORKER_RANK_CPU_MODEL_RUNNER_H_
#define RINGLEADER_WORKER_RANK_CPU_MODEL_RUNNER_H_

#include <memory>

#include "worker/rank/model_runner.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {

// Takes the model; `sgd` must pass ValidateSgdOptions (the loop validates it first).
std::unique_ptr<ModelRunner> CreateCpuModelRunner(std::unique_ptr<Mlp> model,
                                                  const SgdOptions& sgd);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_CPU_MODEL_RUNNER_H_
