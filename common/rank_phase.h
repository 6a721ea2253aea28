// A rank's phase (RankActivity) in words, as failure reasons and `ringleader status` say it:
// "connecting (to rank 0 at 10.1.0.2:41729) for 15.2s".
#ifndef RINGLEADER_COMMON_RANK_PHASE_H_
#define RINGLEADER_COMMON_RANK_PHASE_H_

#include <string>

#include "absl/time/time.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// A phase's words ("connecting", "writing a checkpoint", ...); "" for UNSPECIFIED.
std::string PhaseName(v1::RankPhase phase);

// "training (step 13) for 8.3s": the phase, its detail, and how long it has lasted by now
// (phase_elapsed_ms + `activity_age`, the time since it was reported). "" when no phase was
// reported.
std::string DescribeActivity(const v1::RankActivity& activity,
                             absl::Duration activity_age = absl::ZeroDuration());

// "8.2s", "150ms", "0s": to the 100 ms from a second on, else to the millisecond.
std::string ShortDuration(absl::Duration d);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_RANK_PHASE_H_
