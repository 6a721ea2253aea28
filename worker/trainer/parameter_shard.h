// Where a model's parameters live once they are sharded across ranks: the model runner keeps
// none of its own and takes each layer from here as it runs (ModelRunner::ShardParameters).
// Strategy fsdp's FsdpParameters (worker/sync/fsdp_parameters.h) implements it; that header
// documents each call's collectives and errors.
// Thread-safety: not thread-safe; the rank's training thread owns it.
#ifndef RINGLEADER_WORKER_TRAINER_PARAMETER_SHARD_H_
#define RINGLEADER_WORKER_TRAINER_PARAMETER_SHARD_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

class ParameterShard {
 public:
  virtual ~ParameterShard() = default;
  // Copies this rank's owned elements of the full parameters (one pointer per parameter, in the
  // shard's memory) into the shard. No collective.
  virtual absl::Status LoadOwned(const std::vector<const float*>& full) = 0;
  // Layer k's weight and bias, gathered (ready for the compute the caller issues next, which
  // on a GPU runs after the gather without the host waiting for it); valid until the next
  // Acquire or Release. A ParameterProvider for the Mlp.
  virtual absl::StatusOr<LayerParameters> Acquire(size_t k) = 0;
  // Ends a pass: waits for the pass's gathers, then frees every gathered layer. No new
  // collective. Errors: a failed gather's (the layers are freed anyway).
  virtual absl::Status Release() = 0;
  // Parameter i's owned elements in the shard's memory, writable (what the optimizer steps);
  // null when this rank owns none.
  virtual float* owned_parameter(size_t i) = 0;
  // Every parameter whole, as host vectors (a collective), for a checkpoint.
  virtual absl::StatusOr<std::vector<std::vector<float>>> GatherAll() = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_PARAMETER_SHARD_H_
