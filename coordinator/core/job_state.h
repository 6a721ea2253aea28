// The job state machine: which transitions are legal, and how one is recorded.
//
//   SubmitJob
//       │
//       ▼
//    QUEUED ──N idle workers assigned──▶ RENDEZVOUS ──every rank joined──▶ RUNNING
//     ▲  │ ▲                               │  │  │                          │  │  │
//     │  │ └──restart (a rank failed or ───┘  │  │ a rank failed or lost,   │  │  │ every rank
//     │  │    lost, restarts left; backoff)   │  │ rendezvous timeout,      │  │  │ finished ok
//     │  │                                    │  │ fingerprint mismatch     │  │  ▼
//     │  │ CancelJob               CancelJob  │  │ (no restarts left, or    │  │ SUCCEEDED
//     │  ▼                                    │  ▼  a fault of the job)     │  │
//     │ CANCELLED ◀───────────────────────────┘ FAILED ◀──same, RUNNING────┘  │
//     │     ▲                                                                  │
//     │     └──────────────────────CancelJob───────────────────────────────────┤
//     └──────restart (a rank failed or lost, restarts left; backoff)───────────┘
//
// A restart goes back to QUEUED at the head of the queue (it is placed again after its
// backoff, on any suitable idle workers, as generation G+1). A failed check, a fingerprint
// mismatch and a rank's JOB_ERROR failure are faults of the job, never restarted.
//
// SUCCEEDED, FAILED and CANCELLED are terminal. Every transition is recorded in the job's
// `transitions` with the time (from the coordinator's injected clock) and a reason.
#ifndef RINGLEADER_COORDINATOR_CORE_JOB_STATE_H_
#define RINGLEADER_COORDINATOR_CORE_JOB_STATE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/states.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// True when the diagram above has an arrow from `from` to `to`. UNSPECIFIED → QUEUED is the
// submission.
bool IsLegalTransition(v1::JobState from, v1::JobState to);

// Moves `job` to `to` and appends {to, now, reason} to its transitions. Does not touch the
// version (the coordinator bumps it once per change). Errors: FAILED_PRECONDITION naming both
// states when the transition is illegal; `job` is then unchanged.
absl::Status RecordTransition(v1::JobStatus* job, v1::JobState to, absl::Time now,
                              std::string reason);

// The reason of the job's last transition ("" when it has none).
std::string LastReason(const v1::JobStatus& job);

// Whether the job's current attempt is over: the job ended, or it went back to the queue for a
// restart (its generation is bumped only when it is placed again).
bool AttemptOver(const v1::JobStatus& job);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_JOB_STATE_H_
