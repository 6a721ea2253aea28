#include "coordinator/core/report_rate_limiter.h"

#include <algorithm>

namespace ringleader {
namespace {

// Refills are computed in floating point: 200 tokens/s x 5 ms may come out a hair under 1.
constexpr double kWholeToken = 1.0 - 1e-9;

}  // namespace

TokenBucket::TokenBucket(double per_second, double burst, absl::Time now)
    : per_second_(per_second), burst_(burst), tokens_(burst), last_(now) {}

bool TokenBucket::TryTake(absl::Time now) {
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + per_second_ * absl::ToDoubleSeconds(now - last_));
    last_ = now;
  }
  if (tokens_ < kWholeToken) return false;
  tokens_ = std::max(0.0, tokens_ - 1.0);
  return true;
}

ReportRateLimiter::ReportRateLimiter(uint32_t per_second, uint32_t burst)
    : per_second_(per_second), burst_(std::max<uint32_t>(1, burst)) {}

bool ReportRateLimiter::Allow(const AttemptId& attempt, uint32_t rank, absl::Time now) {
  if (per_second_ == 0) return true;
  auto& ranks = buckets_[attempt];
  auto it = ranks.find(rank);
  if (it == ranks.end()) {
    it = ranks.emplace(rank, TokenBucket(per_second_, burst_, now)).first;
  }
  return it->second.TryTake(now);
}

void ReportRateLimiter::EndAttempt(const AttemptId& attempt) { buckets_.erase(attempt); }

size_t ReportRateLimiter::buckets() const {
  size_t total = 0;
  for (const auto& [attempt, ranks] : buckets_) total += ranks.size();
  return total;
}

}  // namespace ringleader
