// Where a rank process is in its life (RankPhase and a detail such as "step 13" or "connecting
// to rank 0 at 10.1.0.2:41729"), for the ProgressReporter to send with every report and
// keepalive: a failure's reason then says where each rank was (coordinator/core/culprit.h).
//
//   STARTING -> LOADING_DATA -> [RESUMING] -> RENDEZVOUS <-> CONNECTING -> TRAINING
//     -> (EVALUATING, CHECKPOINTING, TRAINING)* -> SHUTTING_DOWN
//
// Thread-safety: Set from the training thread (and the rendezvous callbacks it runs),
// Current from the reporter's sender thread.
#ifndef RINGLEADER_WORKER_RANK_RANK_ACTIVITY_H_
#define RINGLEADER_WORKER_RANK_RANK_ACTIVITY_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

class RankActivityTracker {
 public:
  // `clock` (not owned; nullptr = Clock::Real()) measures how long a phase has lasted.
  explicit RankActivityTracker(Clock* clock = nullptr);

  // Enters `phase` (its elapsed time restarts) with `detail`.
  void Set(v1::RankPhase phase, std::string detail = "");
  // Changes the detail only: the phase goes on (e.g. the next peer while connecting, or the
  // next step while training, whose time counts from the step's start).
  void SetDetail(std::string detail);
  // The phase entered last, its detail and how long it has lasted so far.
  v1::RankActivity Current() const;
  v1::RankPhase phase() const;

 private:
  Clock* const clock_;
  mutable absl::Mutex mu_;
  v1::RankPhase phase_ ABSL_GUARDED_BY(mu_) = v1::RANK_PHASE_UNSPECIFIED;
  std::string detail_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_RANK_ACTIVITY_H_
