#include "worker/rank/evaluation.h"

#include <cmath>
#include <cstring>

#include "common/status_macros.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/mlp.h"

namespace ringleader {

EvaluationShard EvaluationShardOf(size_t examples, uint32_t rank, uint32_t world_size) {
  return {examples * rank / world_size, examples * (rank + 1) / world_size};
}

absl::StatusOr<EvaluationTotals> EvaluateAcrossRanks(ModelRunner* runner, Collective* comm,
                                                     const Dataset& shard, size_t batch,
                                                     absl::Duration timeout) {
  ASSIGN_OR_RETURN(const Mlp::EvalResult evaluated, runner->Evaluate(shard, batch));
  // {correct, loss sum, examples}: integers below 2^24 are exact in fp32.
  const float local[3] = {static_cast<float>(std::llround(evaluated.accuracy * evaluated.examples)),
                          static_cast<float>(evaluated.loss * evaluated.examples),
                          static_cast<float>(evaluated.examples)};
  ASSIGN_OR_RETURN(StagedBytes sums, StagedBytes::Create(runner->memory(), sizeof(local)));
  std::memcpy(sums.host(), local, sizeof(local));
  CollectiveOptions options;
  options.timeout = timeout;
  RETURN_IF_ERROR(sums.Upload());
  RETURN_IF_ERROR(
      comm->AllReduce(TensorView{sums.wire(), 3, DataType::kFloat32}, ReduceOp::kSum, options)
          ->Wait());
  RETURN_IF_ERROR(sums.Download());
  float total[3];
  std::memcpy(total, sums.host(), sizeof(total));
  EvaluationTotals totals;
  totals.examples = total[2];
  totals.accuracy = totals.examples > 0 ? total[0] / totals.examples : 0;
  totals.loss = totals.examples > 0 ? total[1] / totals.examples : 0;
  return totals;
}

}  // namespace ringleader
