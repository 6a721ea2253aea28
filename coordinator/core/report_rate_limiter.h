// How often each rank of an attempt may call ReportProgress: a token bucket per (job,
// generation, rank), on the coordinator's injected clock (monotonic in production).
//
// A bucket holds at most `burst` tokens and starts full; it refills at `per_second` tokens a
// second; every call takes one token, whatever it carries (a batch of steps, epoch reports or
// nothing: a keepalive). A call that finds no token is refused; the caller answers it with
// RESOURCE_EXHAUSTED and reporters retry it after a backoff (see the coordinator's
// ReportProgress). A rank batches up to 20 steps a call (ProgressReporterOptions::max_steps), so
// the default of 200 calls a second carries 4000 steps a second.
//
// Memory: one bucket per rank that called, kept until EndAttempt drops the attempt's buckets
// (the coordinator does when the attempt ends), so at most world size buckets per running
// attempt. Callers create buckets only for attempts and ranks they checked exist.
//
// Thread-safety: thread-compatible (the Coordinator guards it with its mutex).
#ifndef RINGLEADER_COORDINATOR_CORE_REPORT_RATE_LIMITER_H_
#define RINGLEADER_COORDINATOR_CORE_REPORT_RATE_LIMITER_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "coordinator/core/attempt_id.h"

namespace ringleader {

// `per_second` tokens a second, at most `burst` held; full when made.
class TokenBucket {
 public:
  TokenBucket(double per_second, double burst, absl::Time now);

  // Refills for the time since the last call (a clock reading earlier than the last one refills
  // nothing), then takes one token if a whole one is there. False: none, nothing taken.
  bool TryTake(absl::Time now);

 private:
  double per_second_;
  double burst_;
  double tokens_;
  absl::Time last_;
};

class ReportRateLimiter {
 public:
  // `per_second` calls a second per rank, in bursts of up to `burst` (at least 1). per_second 0:
  // no limit (Allow always answers true and keeps no bucket).
  ReportRateLimiter(uint32_t per_second, uint32_t burst);

  uint32_t per_second() const { return per_second_; }
  uint32_t burst() const { return burst_; }

  // Whether rank `rank` of `attempt` may make a call at `now`; takes its token when so. The
  // first call of a rank creates its bucket, full.
  bool Allow(const AttemptId& attempt, uint32_t rank, absl::Time now);

  // Drops the attempt's buckets (the attempt ended). A later Allow for it starts full again.
  void EndAttempt(const AttemptId& attempt);

  // Attempts with buckets, and buckets in all (for tests).
  size_t attempts() const { return buckets_.size(); }
  size_t buckets() const;

 private:
  const uint32_t per_second_;
  const uint32_t burst_;
  absl::flat_hash_map<AttemptId, absl::flat_hash_map<uint32_t, TokenBucket>> buckets_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_REPORT_RATE_LIMITER_H_
