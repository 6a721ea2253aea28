// The coordinator's step judge: every step of every rank of one job attempt goes through it, and
// it says what is wrong the moment it can tell. Plain C++, no gRPC, no clock, no lock (the
// Coordinator owns one per attempt and calls it under its mutex).
//
// A step is judged once every rank has reported it, or has reported a later step (a rank's
// reporter may drop old steps under back-pressure: the step is then judged with the ranks that
// reported it). Reports of a rank arrive in step order; a repeated or older step is ignored.
//
//   Add(rank, report) ──non-finite loss──> LOSS_NOT_FINITE at once (that rank, that step)
//        │
//        ▼ the step is complete (every rank at or past it)
//   Judge(step):  digests differ across ranks            ──> COLLECTIVE_MISMATCH (minority ranks)
//                 a rank issued no collective            ──┐
//                 a rank's synced norm == its local norm ──┴> NOT_SYNCHRONIZED (those ranks;
//                   while the synced norms differ             every rank when all bypass)
//                 synced norms differ (rtol), otherwise  ──> GRAD_NORM_MISMATCH (outlying ranks)
//                 drift check step, max drift > tolerance ─> DRIFT (the worst tensor named)
//   every straggler window (straggler_window judged steps lasting straggler_window_ms or more):
//                 who the others waited for, from each step's collective_times (below)
//                 ─> StragglerScore per rank; a rank meeting the bar in straggler_windows
//                    windows in a row ─> STRAGGLER
//
// Stragglers from arrival times. In a synchronous collective the rank that arrives last waits
// least: across ranks, the shortest duration of collective i is the transfer itself, and every
// other rank's excess is time spent waiting for the last one. Each step, the rank that arrived
// last in collective i is charged the median excess of the others; over a window a rank's
// `share` is the part of all waiting it caused. It is a straggler when its share is at least
// min(0.75, 2 / world size), it made the others wait straggler_min_ms or more per step on
// average, and that wait is over (straggler_factor - 1) x its peers' median compute (it takes
// straggler_factor times as long as they do to reach its collectives). Waiting never names a
// link: the cause is "compute" (its work, input or host). Without arrival evidence (reports
// with no collective_times, e.g. a command job's), a rank whose median compute is over
// straggler_factor x the ranks' median is flagged instead; communication time is never used.
//
// Alarms: one per (kind, ranks); the same failure at a later step increments `repeats` instead
// of adding an alarm, so a job warned on every step holds a handful of alarms. Every alarm but
// STRAGGLER is a correctness alarm; under fail_on_desync it fails the job (failed_job = true)
// and the verdict is FAIL, otherwise WARN.
//
// Memory: the unjudged steps (normally one or two: W ranks x ~80 bytes each, plus 4 bytes per
// timed collective), the straggler window (W x straggler_window x 3 floats, the medians' samples
// from the window's first steps, plus W running sums), the alarms (bounded by kinds x distinct rank sets)
// and two rows of the verdict. Nothing grows with the number of steps.
#ifndef RINGLEADER_COORDINATOR_CORE_STEP_JUDGE_H_
#define RINGLEADER_COORDINATOR_CORE_STEP_JUDGE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

struct StepJudgeOptions {
  // Largest relative difference between the ranks' synced grad norms (checks.grad_norm_rtol).
  double grad_norm_rtol = 1e-6;
  // Largest drift max|W_r - W_0| (checks.drift_tolerance).
  double drift_tolerance = 1e-6;
  // A rank that takes this many times as long as its peers to reach its collectives is a
  // straggler (checks.straggler_factor).
  double straggler_factor = 2.0;
  // A straggler window is at least this many judged steps ...
  size_t straggler_window = 20;
  // ... lasting at least this long (the slowest rank's step times added up, ms): short steps
  // are judged over enough time for a throttled or time-shared rank to show.
  double straggler_window_ms = 500;
  // Windows in a row a rank must meet the bar in before it is flagged.
  size_t straggler_windows = 2;
  // Waits below this (per step, milliseconds) are noise, not stragglers.
  double straggler_min_ms = 1.0;
  // checks.on_desync == "fail".
  bool fail_on_desync = true;
  // Global train samples of one step: batch_size x gradient_accumulation_steps x world size
  // (for the verdict's samples/s; 0 = not reported).
  double samples_per_step = 0;
};

// The options a job's (defaults-applied) spec asks for.
StepJudgeOptions StepJudgeOptionsFromSpec(const v1::JobSpec& spec);

class StepJudge {
 public:
  StepJudge(uint32_t world_size, StepJudgeOptions options);

  // One report of rank `rank` (< world size). Alarms raised for the first time are appended to
  // `raised` (may be null); a repeat only counts in the existing alarm. The caller stamps the
  // detection time with SetDetectedTime.
  void Add(uint32_t rank, const v1::StepReport& report, std::vector<v1::Alarm>* raised);

  // Every alarm so far, in the order first raised (detected_unix_ms as the caller set it via
  // SetDetectedTime).
  const std::vector<v1::Alarm>& alarms() const { return alarms_; }
  // Stamps the detection time of the alarms added since the last call.
  void SetDetectedTime(int64_t unix_ms);
  const v1::Verdict& verdict() const { return verdict_; }
  // The latest window's scores, by rank (empty before the first full window).
  const std::vector<v1::StragglerScore>& stragglers() const { return stragglers_; }
  // Changes whenever alarms(), verdict() or stragglers() may have changed (a step judged, an
  // alarm raised or repeated, a detection time stamped): a caller copying them out copies only
  // when it moved. Starts at 0.
  uint64_t revision() const { return revision_; }

  // Steps received but not judged yet.
  size_t pending_steps() const { return pending_.size(); }
  // Approximate bytes held (for the benchmark).
  size_t MemoryBytes() const;

 private:
  // What the checks read of one rank's report: compact, so pending steps stay small.
  struct Figures {
    double loss = 0;
    double local = 0;
    double synced = 0;
    double drift = 0;
    uint64_t digest = 0;
    float step_ms = 0;
    float compute_ms = 0;
    float comm_ms = 0;
    uint32_t collectives = 0;
    // collective_times: how long each collective of the step ran on this rank (us).
    bool has_times = false;
    uint64_t first_collective = 0;
    std::vector<uint32_t> times_us;
    bool has_drift = false;
    bool present = false;
  };
  struct Row {
    std::vector<Figures> ranks;
    std::vector<std::string> drift_tensor;  // filled only on drift-check steps
  };

  void JudgeReadySteps(std::vector<v1::Alarm>* raised);
  void Judge(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised);
  void CheckDigests(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised);
  // NOT_SYNCHRONIZED or GRAD_NORM_MISMATCH.
  void CheckNorms(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised);
  void CheckDrift(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised);
  // Adds the step's arrival evidence to the window: who made the others wait, how long.
  void AddArrivals(const Row& row);
  void UpdateStragglers(uint64_t step, std::vector<v1::Alarm>* raised);
  // Adds the alarm, or counts a repeat of the same (kind, ranks).
  void Raise(v1::Alarm::Kind kind, uint64_t step, std::vector<uint32_t> ranks, std::string tensor,
             std::string message, std::vector<v1::Alarm>* raised);
  static void FillFigures(const Row& row,
                          google::protobuf::RepeatedPtrField<v1::RankStepFigures>* out);

  const uint32_t world_;
  const StepJudgeOptions options_;

  // At most this many steps are kept unjudged (see Add).
  static constexpr uint64_t kMaxStepGap = 1 << 16;

  // Unjudged steps: pending_[i] is step base_step_ + i.
  std::deque<Row> pending_;
  uint64_t base_step_ = 1;
  std::vector<uint64_t> last_step_;  // by rank: the latest step reported (0 = none)
  std::vector<bool> loss_alarmed_;   // by rank: LOSS_NOT_FINITE already raised

  // Straggler window: per rank, the times of the window's first straggler_window steps (for
  // the medians), and over the whole window the wait each rank caused (ms) and the steps in
  // which it was the one waited for most.
  std::vector<std::vector<float>> window_compute_;
  std::vector<std::vector<float>> window_comm_;
  std::vector<std::vector<float>> window_step_;
  std::vector<double> window_caused_ms_;
  std::vector<uint32_t> window_last_;
  size_t window_arrival_steps_ = 0;  // steps of the window with arrival evidence
  size_t window_fill_ = 0;
  double window_ms_ = 0;
  uint64_t window_first_step_ = 0;
  std::vector<size_t> straggler_streak_;  // by rank: windows in a row meeting the bar

  std::vector<v1::Alarm> alarms_;
  uint64_t revision_ = 0;
  size_t unstamped_from_ = 0;  // alarms_[unstamped_from_..] have no detection time yet
  v1::Verdict verdict_;
  std::vector<v1::StragglerScore> stragglers_;
  double judged_step_ms_ = 0;  // sum over judged steps of the slowest rank's step time
  uint64_t judged_steps_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_STEP_JUDGE_H_
