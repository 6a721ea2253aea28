// What the equivalence tests of the sharded strategies (zero2, fsdp) share: one small job run
// through the real training loop under ddp and under the strategy, ranks as threads (gloo over
// loopback, or the shared-memory backend), a fake coordinator recording every report, and the
// comparisons of what the two runs produced (step reports, checkpoint files, measured memory).
//
// The job: an MLP 16-64-33-4 (3369 trainable elements, not divisible by 4), SGD with momentum,
// dampening and weight decay, kEquivalenceSteps steps of batch 8, a checkpoint after step
// kEquivalenceCheckpointInterval and a final one, buckets [fc3] 136, [fc2] 2145, [fc1] 1088
// elements (one layer each).
#ifndef RINGLEADER_WORKER_RANK_SHARDED_EQUIVALENCE_TEST_UTIL_H_
#define RINGLEADER_WORKER_RANK_SHARDED_EQUIVALENCE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "proto/ringleader.pb.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace equivalence {

inline constexpr uint64_t kEquivalenceSteps = 200;
inline constexpr uint64_t kEquivalenceCheckpointInterval = 100;
// Relative difference allowed where the summation order differs (gloo at 4 ranks).
inline constexpr double kGlooTolerance = 1e-4;
inline constexpr uint64_t kTrainableElements = 3369;

enum class Backend { kGloo, kShm };

// The job above under `strategy` at `world` ranks, its checkpoints in a directory of the test's
// own named after strategy, world and `tag`. Defaults applied; valid (checked).
v1::JobSpec EquivalenceSpec(uint32_t world, const std::string& strategy, const std::string& tag);

struct TrainingRun {
  std::vector<RankRunResult> results;
  std::vector<std::vector<v1::StepReport>> steps;  // per rank
  std::vector<v1::EpochReport> epochs;             // rank 0's
  CheckpointData final_checkpoint;                 // rank 0's final.ckpt
  CheckpointData periodic_checkpoint;              // the one after the interval's step
};

// Runs every rank of `spec`; each must succeed when `expect_ok`. With `checkpoints`, reads the
// final and the periodic checkpoint back (expected to exist).
TrainingRun Train(const v1::JobSpec& spec, Backend backend, bool checkpoints = true,
                  bool expect_ok = true);

// |a - b| / max(1e-3, |a|, |b|).
double RelativeDifference(double a, double b);

// Same step, epoch, tensor names, shapes and order (6 parameters and their momentum: a sharded
// strategy writes ddp's format); values bit-identical when `exact`, else within
// kGlooTolerance. Returns the worst relative difference.
double CompareTensors(const CheckpointData& a_run, const CheckpointData& b_run, bool exact,
                      const std::string& what);

// Every step of every rank: losses (and local norms) bit-identical when `exact`, else within
// kGlooTolerance; the strategy's synced norm and collective digest the same on every rank and
// its norm fp32-close to ddp's; `collectives` collectives per step (`why` says which); drift 0
// where measured; the strategy's loss falls. Returns the worst relative loss difference.
double CompareSteps(const TrainingRun& ddp, const TrainingRun& other, uint32_t world, bool exact,
                    uint32_t collectives, const std::string& why);

// Each rank's measured memory (first step) is what plan/memory_plan.h predicts, to the byte.
void ExpectMeasuredIsPredicted(const TrainingRun& run, const v1::JobSpec& spec);

// Two runs of the same job: every loss and synced norm, and the final checkpoint, bit for bit.
void ExpectBitIdentical(const TrainingRun& a, const TrainingRun& b, uint32_t world,
                        const std::string& what);

// `strategy` (zero2 or fsdp) against ddp at 2 ranks with the settings that change how the
// gradients are reduced, each over 200 steps:
//   - sync.gradient_accumulation_steps 2 (shared memory): ddp sums the micro-batches locally and
//     averages once, the sharded strategy averages each micro-batch and sums the averages, so
//     they agree to rounding (kGlooTolerance); `accumulation_collectives` per step; the measured
//     memory (a second gradient shard) is the predicted one;
//   - sync.find_unused_parameters with fc1.bias unused on rank 1 (gloo): both average rank 0's
//     gradient with rank 1's zeros, bit for bit; `unused_collectives` per step;
//   - sync.comm_dtype bf16 (gloo): both round every gradient to bf16, reduce in bf16 (gloo's
//     reduce-scatter is its all-reduce of the padded bucket) and cast back, bit for bit;
//     `unused_collectives` per step; the measured memory (the bf16 copies) is the predicted one.
void ExpectReductionSettingsMatchDdp(const std::string& strategy,
                                     uint32_t accumulation_collectives,
                                     uint32_t unused_collectives);

}  // namespace equivalence
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_SHARDED_EQUIVALENCE_TEST_UTIL_H_
