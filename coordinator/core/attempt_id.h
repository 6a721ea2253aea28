// Names one attempt of a job: (job id, generation). Every attempt message carries both.
#ifndef RINGLEADER_COORDINATOR_CORE_ATTEMPT_ID_H_
#define RINGLEADER_COORDINATOR_CORE_ATTEMPT_ID_H_

#include <utility>

#include "common/ids.h"

namespace ringleader {

struct AttemptId {
  JobId job;
  Generation generation;

  friend bool operator==(const AttemptId& a, const AttemptId& b) {
    return a.job == b.job && a.generation == b.generation;
  }
  friend bool operator!=(const AttemptId& a, const AttemptId& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const AttemptId& id) {
    return H::combine(std::move(h), id.job, id.generation);
  }
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_ATTEMPT_ID_H_
