// Counts and latency histograms of the coordinator's RPCs, by method and status code, for the
// /metrics endpoint (http/prometheus_text.h). The proto handler (rpc_handler.h) records each call,
// from the moment it is handed the request to the moment it answers (a long poll's latency is
// its wait), measured on the coordinator's injected clock.
//
// Histograms are Prometheus-style: a fixed list of bucket upper bounds in seconds (a latency
// equal to a bound falls in that bucket), reported cumulatively, plus the sum and the count.
// Memory is one small record per (method, code) pair seen: at most 20 methods x 17 codes.
//
// Thread-safety: thread-safe (one mutex, held for a few additions per call).
#ifndef RINGLEADER_COORDINATOR_RPC_RPC_STATS_H_
#define RINGLEADER_COORDINATOR_RPC_RPC_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringleader {

class RpcStats {
 public:
  // Upper bounds (seconds) of the default latency buckets: 0.5 ms .. 60 s, covering quick
  // unary calls and long polls (held up to the coordinator's max_wait, 30 s by default).
  static std::vector<double> DefaultBuckets();

  // `bucket_bounds`: ascending upper bounds in seconds (+Inf is implied). Bounds that are not
  // finite, positive and strictly ascending are dropped.
  explicit RpcStats(std::vector<double> bucket_bounds = DefaultBuckets());
  RpcStats(const RpcStats&) = delete;
  RpcStats& operator=(const RpcStats&) = delete;

  // One finished call of `method` (e.g. "Heartbeat") that ended with `code` after `latency`
  // (negative latencies count as 0).
  void Record(absl::string_view method, absl::StatusCode code, absl::Duration latency);

  // One (method, code) pair's figures.
  struct Series {
    std::string method;
    std::string code;  // absl::StatusCodeToString: "OK", "NOT_FOUND", ...
    uint64_t count = 0;
    double sum_seconds = 0;
    // Calls with latency <= bounds[i], one per bound (cumulative); `count` is the +Inf bucket.
    std::vector<uint64_t> cumulative;
  };
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<Series> series;  // by method, then code
  };
  // A consistent copy of every series recorded so far.
  Snapshot Take() const;

 private:
  struct Counts {
    uint64_t count = 0;
    double sum_seconds = 0;
    std::vector<uint64_t> per_bucket;  // not cumulative; one per bound
  };

  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, Counts> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_RPC_STATS_H_
