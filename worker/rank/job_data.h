// The data a job's spec names, loaded for one rank: the training set (the DistributedSampler
// picks this rank's share) and the test set.
#ifndef RINGLEADER_WORKER_RANK_JOB_DATA_H_
#define RINGLEADER_WORKER_RANK_JOB_DATA_H_

#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"
#include "worker/data/dataset.h"

namespace ringleader {

struct TrainTest {
  Dataset train;
  Dataset test;
};

// `data.dataset` "fashion-mnist" (from `data.path`, or Debian's location when empty) or
// "synthetic" (deterministic from the job seed; 4096 train / 1024 test examples unless
// max_*_examples say otherwise), capped by data.max_train_examples / max_test_examples.
// Errors: NOT_FOUND / DATA_LOSS / INVALID_ARGUMENT from the IDX reader naming the file;
// INVALID_ARGUMENT "data.dataset: ..." for an unknown data set.
absl::StatusOr<TrainTest> LoadJobData(const v1::JobSpec& spec);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_JOB_DATA_H_
