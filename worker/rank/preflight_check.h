// A rank's part of a pre-flight check (`ringleader doctor`, a spec's checks.preflight): what
// this rank measures, with no coordinator in sight.
//
//   1. matmul: OpenBLAS sgemm of two n x n fp32 matrices, repeated for `matmul_time` in each of
//      `matmul_windows` windows (each long against a CPU quota's 100 ms period, so a throttled
//      host cannot hide in one slice): the best window's GFLOP/s (a healthy host that lost one
//      window to a neighbour is not named).
//   2. pairs: a round-robin tournament (the circle method; with an odd world one rank sits
//      each round out), so each rank is in one pair per round and every pair meets once. Each
//      pair builds a 2-rank collective through `make_pair` under its own key prefix, then
//      all-reduces `bandwidth_bytes` `bandwidth_repeats` times (median time → MB/s) and 4 bytes
//      `latency_repeats` times (median → µs). A pair that fails is reported failed, with the
//      error, and the rounds go on.
#ifndef RINGLEADER_WORKER_RANK_PREFLIGHT_CHECK_H_
#define RINGLEADER_WORKER_RANK_PREFLIGHT_CHECK_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/collective.h"

namespace ringleader {

struct PreflightCheckOptions {
  int matmul_n = 256;
  absl::Duration matmul_time = absl::Milliseconds(200);  // per window
  int matmul_windows = 3;
  size_t bandwidth_bytes = size_t{4} << 20;  // 4 MiB
  int bandwidth_repeats = 5;
  int latency_repeats = 20;
  // Each pair operation's timeout (a pair that cannot exchange in it has failed).
  absl::Duration timeout = absl::Seconds(10);
  // Measures every duration. Not owned; nullptr = Clock::Real().
  Clock* clock = nullptr;
};

// Builds the 2-rank collective of one pair: `key_prefix` is unique to the pair and round
// ("preflight/<a>-<b>/"; the factory puts the attempt's own prefix in front), `rank` is 0 for
// the lower rank of the pair.
using PairCollectiveFactory = std::function<absl::StatusOr<std::unique_ptr<Collective>>(
    const std::string& key_prefix, int rank)>;

// The pairs of round `round` (0 .. RoundCount(world) - 1), lower rank first.
std::vector<std::pair<int, int>> RoundPairs(int world_size, int round);
int RoundCount(int world_size);

// Runs the check as rank `rank` of `world_size`. Pair failures are in the report; errors are
// for the check itself: INVALID_ARGUMENT (rank out of range, options out of range).
absl::StatusOr<v1::PreflightReport> RunPreflightCheck(int rank, int world_size,
                                                      const PairCollectiveFactory& make_pair,
                                                      const PreflightCheckOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_PREFLIGHT_CHECK_H_
