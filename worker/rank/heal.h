// Healing from a live peer: a rank that restarts without the snapshot every other rank resumes
// from gets it from one that has it, over the job's own collective (a broadcast), never from
// disk (resume.h decides who sends; training_loop.cc rebuilds the receiver's model from it).
#ifndef RINGLEADER_WORKER_RANK_HEAL_H_
#define RINGLEADER_WORKER_RANK_HEAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/tensor_memory.h"

namespace ringleader {

// Every rank of `comm` calls it; rank `root` passes the bytes to send (`bytes`, ignored on the
// others). Returns the bytes on every rank (the root's own, as given): first their length, then
// the bytes, broadcast in place where `memory` (the runner's) is host memory, staged through it
// otherwise (device memory for NCCL).
// Errors: INVALID_ARGUMENT for a root outside the group; the collective's (DEADLINE_EXCEEDED
// after `timeout`, UNAVAILABLE for a peer gone); `memory`'s.
absl::StatusOr<std::string> BroadcastBytes(Collective* comm, TensorMemory* memory, int root,
                                           std::string bytes, absl::Duration timeout);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_HEAL_H_
