// Epoch-end evaluation shared across the ranks: rank r evaluates test examples
// [r*N/W, (r+1)*N/W) and the sums (correct, loss, examples) are combined by one all-reduce, so
// the ranks do equal work between two collectives and it is W times shorter. (Rank 0 evaluating
// alone left its peers waiting in the next step's first collective for the whole evaluation,
// which failed them with DEADLINE_EXCEEDED whenever it took longer than collective_timeout_ms.)
#ifndef RINGLEADER_WORKER_RANK_EVALUATION_H_
#define RINGLEADER_WORKER_RANK_EVALUATION_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/data/dataset.h"
#include "worker/rank/model_runner.h"

namespace ringleader {

// Rank `rank` of `world_size`'s share of a test set of `examples` examples: [begin, end).
struct EvaluationShard {
  size_t begin = 0;
  size_t end = 0;
};
EvaluationShard EvaluationShardOf(size_t examples, uint32_t rank, uint32_t world_size);

// The whole test set's figures, the same on every rank.
struct EvaluationTotals {
  double examples = 0;
  double accuracy = 0;  // correct / examples (0 for no examples)
  double loss = 0;      // mean loss per example
};

// Evaluates `shard` (this rank's share) on `runner` in batches of `batch` and all-reduces the
// sums over `comm` within `timeout`. A collective: every rank calls it at the same point.
// Errors: the runner's and the collective's.
absl::StatusOr<EvaluationTotals> EvaluateAcrossRanks(ModelRunner* runner, Collective* comm,
                                                     const Dataset& shard, size_t batch,
                                                     absl::Duration timeout);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_EVALUATION_H_
