#include "worker/rank/preflight_check.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

double MedianSeconds(std::vector<absl::Duration> times) {
  std::sort(times.begin(), times.end());
  return absl::ToDoubleSeconds(times[times.size() / 2]);
}

// The best rate over `matmul_windows` windows of `matmul_time` each: a window is long against a
// CPU quota's period, so a throttled host shows in every one, while a healthy host that lost
// one window to a neighbour shows its rate in another.
double MatmulGflops(const PreflightCheckOptions& options, Clock* clock) {
  const int n = options.matmul_n;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f);
  std::vector<float> b(static_cast<size_t>(n) * n, 0.25f);
  std::vector<float> c(static_cast<size_t>(n) * n, 0.0f);
  const double flops_per_call = 2.0 * n * n * n;
  double best = 0;
  for (int window = 0; window < options.matmul_windows; ++window) {
    double flops = 0;
    const absl::Time start = clock->Now();
    absl::Duration elapsed;
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                  b.data(), n, 0.0f, c.data(), n);
      flops += flops_per_call;
      elapsed = clock->Now() - start;
    } while (elapsed < options.matmul_time);
    best = std::max(best, flops / absl::ToDoubleSeconds(elapsed) / 1e9);
  }
  return best;
}

// `repeats` all-reduces of `elements` floats after one warm-up; the median time of one.
absl::StatusOr<double> TimeAllReduce(Collective* pair, size_t elements, int repeats,
                                     const PreflightCheckOptions& options, Clock* clock) {
  std::vector<float> buffer(elements, 1.0f);
  CollectiveOptions op;
  op.timeout = options.timeout;
  std::vector<absl::Duration> times;
  for (int i = 0; i <= repeats; ++i) {
    const absl::Time start = clock->Now();
    const absl::Status done =
        pair->AllReduce(TensorView{buffer.data(), elements, DataType::kFloat32}, ReduceOp::kAvg,
                        op)
            ->Wait();
    if (!done.ok()) return done;
    if (i > 0) times.push_back(clock->Now() - start);  // the first one warms up
  }
  return MedianSeconds(std::move(times));
}

v1::PreflightPairReport ExchangeWith(int rank, int a, int b, int round,
                                     const PairCollectiveFactory& make_pair,
                                     const PreflightCheckOptions& options, Clock* clock) {
  v1::PreflightPairReport report;
  report.set_rank_a(a);
  report.set_rank_b(b);
  report.set_round(round);
  report.set_bandwidth_bytes(options.bandwidth_bytes);
  auto failed = [&](const absl::Status& status) {
    report.set_ok(false);
    report.set_error(std::string(status.message()));
    report.set_bandwidth_mb_per_s(0);
    report.set_latency_us(0);
    return report;
  };
  absl::StatusOr<std::unique_ptr<Collective>> pair =
      make_pair(absl::StrCat("preflight/", a, "-", b, "/"), rank == a ? 0 : 1);
  if (!pair.ok()) return failed(pair.status());
  const size_t elements = options.bandwidth_bytes / sizeof(float);
  absl::StatusOr<double> bandwidth_s =
      TimeAllReduce(pair->get(), elements, options.bandwidth_repeats, options, clock);
  if (!bandwidth_s.ok()) {
    (*pair)->Abort(bandwidth_s.status());
    return failed(bandwidth_s.status());
  }
  absl::StatusOr<double> latency_s =
      TimeAllReduce(pair->get(), 1, options.latency_repeats, options, clock);
  if (!latency_s.ok()) {
    (*pair)->Abort(latency_s.status());
    return failed(latency_s.status());
  }
  if (absl::Status closed = (*pair)->Close(options.timeout); !closed.ok()) return failed(closed);
  report.set_ok(true);
  report.set_bandwidth_mb_per_s(static_cast<double>(elements * sizeof(float)) /
                                std::max(*bandwidth_s, 1e-9) / 1e6);
  report.set_latency_us(*latency_s * 1e6);
  return report;
}

}  // namespace

int RoundCount(int world_size) {
  if (world_size < 2) return 0;  // nobody to pair with
  return world_size + world_size % 2 - 1;
}

std::vector<std::pair<int, int>> RoundPairs(int world_size, int round) {
  // The circle method: position 0 stays, the others rotate by one each round.
  const int even = world_size + world_size % 2;  // an odd world gets a bye (rank `world_size`)
  std::vector<std::pair<int, int>> pairs;
  if (even < 2) return pairs;
  std::vector<int> order(even);
  order[0] = 0;
  for (int i = 1; i < even; ++i) order[i] = 1 + (i - 1 + round) % (even - 1);
  for (int i = 0; i < even / 2; ++i) {
    const int a = std::min(order[i], order[even - 1 - i]);
    const int b = std::max(order[i], order[even - 1 - i]);
    if (b < world_size) pairs.emplace_back(a, b);
  }
  return pairs;
}

absl::StatusOr<v1::PreflightReport> RunPreflightCheck(int rank, int world_size,
                                                      const PairCollectiveFactory& make_pair,
                                                      const PreflightCheckOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside world size ", world_size));
  }
  if (options.matmul_n < 1 || options.matmul_windows < 1 || options.bandwidth_bytes < sizeof(float) ||
      options.bandwidth_repeats < 1 || options.latency_repeats < 1 ||
      options.matmul_time <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "preflight options: matmul_n, matmul_time, bandwidth_bytes and the repeats must be "
        "positive");
  }
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  v1::PreflightReport report;
  report.set_matmul_n(options.matmul_n);
  report.set_gflops(MatmulGflops(options, clock));
  for (int round = 0; round < RoundCount(world_size); ++round) {
    for (const auto& [a, b] : RoundPairs(world_size, round)) {
      if (a != rank && b != rank) continue;
      *report.add_pairs() = ExchangeWith(rank, a, b, round, make_pair, options, clock);
    }
  }
  return report;
}

}  // namespace ringleader
