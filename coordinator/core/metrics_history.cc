#include "coordinator/core/metrics_history.h"

#include <algorithm>

namespace ringleader {

MetricsHistory::MetricsHistory(uint32_t world_size, double samples_per_rank_step,
                               size_t full_resolution_steps)
    : world_(std::max<uint32_t>(world_size, 1)),
      samples_per_rank_step_(samples_per_rank_step),
      full_resolution_steps_(std::max<size_t>(full_resolution_steps, 1)),
      last_drift_(world_) {}

std::optional<double> MetricsHistory::last_drift(uint32_t rank) const {
  if (rank >= world_ || !last_drift_[rank].has_value()) return std::nullopt;
  return last_drift_[rank]->drift;
}

void MetricsHistory::Add(uint32_t rank, const v1::StepReport& report) {
  const uint64_t step = report.step();
  if (rank >= world_ || step == 0) return;
  if (report.has_drift() &&
      (!last_drift_[rank].has_value() || step >= last_drift_[rank]->step)) {
    last_drift_[rank] = LastDrift{step, report.drift()};
  }
  // A step already decimated away stays away.
  if (step + full_resolution_steps_ <= newest_ && step % stride_ != 0) return;
  std::vector<Point>& row = steps_[step];
  if (row.empty()) row.resize(world_);
  Point& p = row[rank];
  p.present = true;
  p.loss = static_cast<float>(report.loss());
  p.local = static_cast<float>(report.local_grad_norm());
  p.synced = static_cast<float>(report.synced_grad_norm());
  p.has_drift = report.has_drift();
  p.drift = static_cast<float>(report.drift());
  p.step_ms = static_cast<float>(report.step_ms());
  p.compute_ms = static_cast<float>(report.compute_ms());
  p.comm_ms = static_cast<float>(report.comm_ms());
  newest_ = std::max(newest_, step);
  const uint64_t recent_from =
      newest_ >= full_resolution_steps_ ? newest_ - full_resolution_steps_ + 1 : 1;
  // Steps leaving the recent window stay only on the stride.
  EraseOffStride(swept_, recent_from);
  swept_ = std::max(swept_, recent_from);
  if (steps_.size() > 2 * full_resolution_steps_) {
    // The older part holds about recent_from / stride steps: doubling the stride halves it.
    stride_ *= 2;
    EraseOffStride(1, recent_from);
  }
}

void MetricsHistory::EraseOffStride(uint64_t from, uint64_t to) {
  for (auto it = steps_.lower_bound(from); it != steps_.end() && it->first < to;) {
    it = it->first % stride_ != 0 ? steps_.erase(it) : std::next(it);
  }
}

void MetricsHistory::Export(v1::GetJobMetricsResponse* out) const {
  out->set_full_resolution_steps(static_cast<uint32_t>(full_resolution_steps_));
  out->set_decimation_stride(stride_);
  for (const auto& [step, row] : steps_) {
    for (uint32_t r = 0; r < row.size(); ++r) {
      const Point& p = row[r];
      if (!p.present) continue;
      v1::MetricsPoint* point = out->add_points();
      point->set_step(step);
      point->set_rank(r);
      point->set_loss(p.loss);
      point->set_local_grad_norm(p.local);
      point->set_synced_grad_norm(p.synced);
      point->set_has_drift(p.has_drift);
      point->set_drift(p.drift);
      point->set_step_ms(p.step_ms);
      point->set_compute_ms(p.compute_ms);
      point->set_comm_ms(p.comm_ms);
      if (samples_per_rank_step_ > 0 && p.step_ms > 0) {
        point->set_samples_per_second(samples_per_rank_step_ / (p.step_ms / 1000.0));
      }
    }
  }
}

}  // namespace ringleader
