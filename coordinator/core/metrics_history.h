// Per step and per rank figures of one job attempt (loss, local and synced grad norm, drift,
// step / compute / communication time, train samples/s), for `ringleader metrics` and charts.
//
// Bounded memory: the most recent `full_resolution_steps` steps are kept whole; a step leaving
// that window is kept only if it is a multiple of `stride`, and the stride doubles whenever the
// older part has grown to `full_resolution_steps` steps (so it grows with log2 of the job's
// length and the old steps stay spread over the whole job). At most 2 x full_resolution_steps
// steps x world size
// points are held (default 1024: 64 ranks hold at most 2048 x 64 x 40 bytes, about 5 MiB), for
// any length of job. Not thread-safe (the Coordinator calls it under its lock).
#ifndef RINGLEADER_COORDINATOR_CORE_METRICS_HISTORY_H_
#define RINGLEADER_COORDINATOR_CORE_METRICS_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

class MetricsHistory {
 public:
  // `samples_per_rank_step`: batch_size x gradient_accumulation_steps (0 = no samples/s).
  MetricsHistory(uint32_t world_size, double samples_per_rank_step,
                 size_t full_resolution_steps = 1024);

  // Records rank `rank`'s report (a rank's repeated step replaces its earlier figures).
  void Add(uint32_t rank, const v1::StepReport& report);

  // Every point held, by step then rank, with the resolution fields of `out` filled.
  void Export(v1::GetJobMetricsResponse* out) const;

  // The drift rank `rank` reported last (in step order) in this attempt; nullopt when none.
  std::optional<double> last_drift(uint32_t rank) const;

  size_t steps_held() const { return steps_.size(); }
  uint64_t stride() const { return stride_; }

 private:
  struct Point {
    float loss = 0;
    float local = 0;
    float synced = 0;
    float drift = 0;
    float step_ms = 0;
    float compute_ms = 0;
    float comm_ms = 0;
    bool has_drift = false;
    bool present = false;
  };
  // Erases the steps in [from, to) that are not multiples of the stride.
  void EraseOffStride(uint64_t from, uint64_t to);

  const uint32_t world_;
  const double samples_per_rank_step_;
  const size_t full_resolution_steps_;
  uint64_t stride_ = 1;
  uint64_t newest_ = 0;
  uint64_t swept_ = 1;  // steps before this have been thinned to the stride
  std::map<uint64_t, std::vector<Point>> steps_;
  // Per rank: the latest step with a drift measurement and that drift (kept apart from
  // `steps_`, whose decimation may drop it).
  struct LastDrift {
    uint64_t step = 0;
    double drift = 0;
  };
  std::vector<std::optional<LastDrift>> last_drift_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_METRICS_HISTORY_H_
