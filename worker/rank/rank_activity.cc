#include "worker/rank/rank_activity.h"

#include <algorithm>
#include <utility>

namespace ringleader {

RankActivityTracker::RankActivityTracker(Clock* clock)
    : clock_(clock != nullptr ? clock : Clock::Real()) {}

void RankActivityTracker::Set(v1::RankPhase phase, std::string detail) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  phase_ = phase;
  detail_ = std::move(detail);
  since_ = now;
}

void RankActivityTracker::SetDetail(std::string detail) {
  absl::MutexLock lock(&mu_);
  detail_ = std::move(detail);
}

v1::RankActivity RankActivityTracker::Current() const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  v1::RankActivity activity;
  activity.set_phase(phase_);
  activity.set_detail(detail_);
  activity.set_phase_elapsed_ms(static_cast<uint64_t>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(now - since_))));
  return activity;
}

v1::RankPhase RankActivityTracker::phase() const {
  absl::MutexLock lock(&mu_);
  return phase_;
}

}  // namespace ringleader
