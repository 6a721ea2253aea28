// The verdict `ringleader watch` gives at the end of a job: did it succeed, and did data
// parallelism behave (every rank saw the same synchronised gradient, no rank drifted)?
//
// A `RunObserver` is fed every JobStatus the watch receives; it keeps each rank's step reports
// of the current generation (a restarted attempt starts afresh) and concludes:
//   * grad norms: at the last step every rank reported, the synced gradient norms must agree
//     to a relative difference of at most 1e-6 (all ranks reduce the same buckets);
//   * drift: the largest cross-rank parameter drift measured must be exactly 0.
// A check with nothing to look at (no common step, drift never measured) is "not checked" and
// does not fail the verdict. Not thread-safe.
#ifndef RINGLEADER_CLIENT_RUN_VERDICT_H_
#define RINGLEADER_CLIENT_RUN_VERDICT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

// Largest relative difference of synced grad norms tolerated between ranks.
inline constexpr double kGradNormTolerance = 1e-6;

struct GradNormCheck {
  bool checked = false;              // false: no step was reported by every rank
  uint64_t step = 0;                 // the last common step
  std::map<uint32_t, double> norms;  // rank -> synced grad norm at `step`
  double relative_difference = 0;    // (max - min) / max(|max|, |min|)
  bool passed = true;
};

struct DriftCheck {
  bool checked = false;  // false: no drift measurement seen
  int measurements = 0;
  double max_drift = 0;
  uint32_t rank = 0;  // where the max was seen
  uint64_t step = 0;
  std::string parameter;
  bool passed = true;
};

struct RunVerdict {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  bool has_accuracy = false;
  uint32_t final_epoch = 0;
  double final_accuracy = 0;
  GradNormCheck grad_norms;
  DriftCheck drift;
  // SUCCEEDED, and neither check failed.
  bool passed = false;
};

class RunObserver {
 public:
  // Records the ranks' last step reports. Ignores statuses of older generations.
  void Observe(const v1::JobStatus& job);

  // The verdict on `final_job` (observed too).
  RunVerdict Conclude(const v1::JobStatus& final_job);

 private:
  uint64_t generation_ = 0;
  // rank -> step -> synced grad norm, for the current generation. Bounded: see Observe.
  std::map<uint32_t, std::map<uint64_t, double>> synced_norms_;
  // (rank, step) drift measurements already counted: statuses repeat a rank's last step.
  std::set<std::pair<uint32_t, uint64_t>> measured_;
  DriftCheck drift_;
};

// Multi-line text of `verdict`, ending in "result: PASS" or "result: FAIL".
std::string FormatVerdict(const RunVerdict& verdict);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_RUN_VERDICT_H_
