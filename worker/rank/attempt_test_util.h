// Test helper: one attempt (generation) of job "job-1" through the real RunRank, every rank a
// thread training over gloo on loopback, reporting to a fake coordinator that also serves the
// attempt's key-value store (what the resume decision goes through). Used by the restart tests:
// generation 1 crashes, generation 2 resumes.
#ifndef RINGLEADER_WORKER_RANK_ATTEMPT_TEST_UTIL_H_
#define RINGLEADER_WORKER_RANK_ATTEMPT_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/training_loop.h"

namespace ringleader {

// FakeCoordinator with the key-value RPCs of one attempt (KvGet waits for its key).
class KvFakeCoordinator : public FakeCoordinator {
 public:
  using FakeCoordinator::FakeCoordinator;
  absl::StatusOr<v1::KvSetResponse> KvSet(const v1::KvSetRequest& request) override;
  absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request) override;

 private:
  absl::Mutex kv_mu_;
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(kv_mu_);
};

struct AttemptResult {
  std::vector<RankRunResult> results;            // per rank
  std::vector<std::vector<v1::StepReport>> steps;  // per rank, as the coordinator got them
};

// Every rank of `spec` (defaults applied) as generation `generation` of job "job-1"; an
// injected crash fault returns an error instead of aborting; `tweak` (optional) adjusts each
// rank's options.
AttemptResult RunAttempt(const v1::JobSpec& spec, uint64_t generation,
                         const std::function<void(uint32_t, TrainingLoopOptions*)>& tweak =
                             nullptr);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_ATTEMPT_TEST_UTIL_H_
