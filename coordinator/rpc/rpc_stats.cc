#include "coordinator/rpc/rpc_stats.h"

#include <algorithm>
#include <cmath>

namespace ringleader {
namespace {

std::vector<double> Sanitized(std::vector<double> bounds) {
  std::vector<double> kept;
  for (double bound : bounds) {
    if (!std::isfinite(bound) || bound <= 0) continue;
    if (!kept.empty() && bound <= kept.back()) continue;
    kept.push_back(bound);
  }
  return kept;
}

}  // namespace

std::vector<double> RpcStats::DefaultBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,   1,      2.5,   5,    10,    30,    60};
}

RpcStats::RpcStats(std::vector<double> bucket_bounds)
    : bounds_(Sanitized(std::move(bucket_bounds))) {}

void RpcStats::Record(absl::string_view method, absl::StatusCode code, absl::Duration latency) {
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(latency));
  // The first bound >= seconds: `le` buckets include their bound.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  absl::MutexLock lock(&mu_);
  Counts& counts = counts_[{std::string(method), absl::StatusCodeToString(code)}];
  if (counts.per_bucket.empty()) counts.per_bucket.resize(bounds_.size());
  ++counts.count;
  counts.sum_seconds += seconds;
  if (bucket < bounds_.size()) ++counts.per_bucket[bucket];
}

RpcStats::Snapshot RpcStats::Take() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  snapshot.series.reserve(counts_.size());
  for (const auto& [key, counts] : counts_) {
    Series series;
    series.method = key.first;
    series.code = key.second;
    series.count = counts.count;
    series.sum_seconds = counts.sum_seconds;
    series.cumulative.resize(bounds_.size());
    uint64_t running = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      running += counts.per_bucket[i];
      series.cumulative[i] = running;
    }
    snapshot.series.push_back(std::move(series));
  }
  return snapshot;
}

}  // namespace ringleader
