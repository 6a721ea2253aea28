// Cross-rank weight drift: how far each replica's parameters are from rank 0's. After a correct
// synchronised step every replica holds bit-identical parameters, so the drift is exactly 0; a
// rank whose gradients were not synced (or whose optimizer diverged) shows up as drift > 0 on a
// named tensor.
//
// Method: rank 0 packs its parameters into one scratch buffer (in the parameters' memory: host
// or GPU, see DriftOptions::memory), broadcasts it; every rank computes max|W_r - W_0| per
// tensor where the parameters live (drift_math.h, the same arithmetic on host and GPU), then
// the per-tensor maxima are all-gathered so every rank returns the same verdict (worst tensor
// and worst rank). Costs one broadcast of the whole model plus an all-gather of one float per
// tensor per rank: run it every few steps, not every step.
#ifndef RINGLEADER_WORKER_SYNC_DRIFT_H_
#define RINGLEADER_WORKER_SYNC_DRIFT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/parameter.h"

namespace ringleader {

struct DriftResult {
  double max_drift = 0;            // max over ranks and tensors of max|W_r - W_0|
  std::string worst_parameter;     // tensor with max_drift (the first one when all are 0)
  int worst_rank = 0;              // rank with max_drift (0 when all are 0)
  double local_max_drift = 0;      // this rank's max over tensors
  std::vector<double> per_parameter;  // per tensor, max over ranks
};

struct DriftOptions {
  // Timeout of each collective. > 0.
  absl::Duration timeout = absl::Seconds(60);
  // If non-null, the collectives are recorded here (bucket id kTagDrift).
  CollectiveLedger* ledger = nullptr;
  // Where the parameters live; the scratch buffer and the comparison run there (a reduction
  // kernel on the GPU: only one value per tensor comes back). nullptr = host memory. Its kind
  // must be the collective's memory_kind(). Not owned.
  TensorMemory* memory = nullptr;
};

// `params[i]` points at parameters()[i].count floats in `opts.memory`. Every rank must pass the
// same parameter list. Errors: INVALID_ARGUMENT (sizes differ, null pointer, naming the
// parameter; a memory whose kind is not the collective's); the memory's errors (device
// failures); the collectives' errors.
// NaN anywhere makes that tensor's drift NaN and it is reported as the worst.
absl::StatusOr<DriftResult> MeasureDrift(Collective* comm, const std::vector<ParameterInfo>& infos,
                                         const std::vector<const float*>& params,
                                         const DriftOptions& opts = {});

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_DRIFT_H_
