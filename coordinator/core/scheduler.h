// Strict FIFO placement of queued jobs onto idle workers, packed by topology. Pure functions, no
// state.
//
// Policy:
//   * The oldest queued job (the head) is placed first; if it does not fit, nothing behind it is
//     placed (no backfilling: a big job is never starved by small ones behind it).
//   * A job of world size N takes N IDLE workers that can serve it. A "nccl" job needs workers
//     with a device of kind "cuda"; any other backend ("gloo") runs on any worker.
//   * A quarantined worker (WorkerRecord::quarantine_reason) is never placed, except by a job
//     pinned to it (a doctor run naming it); a pinned job takes only its pinned workers.
//   * Packing by topology (WorkerRecord::topology, a daemon's --topology=RACK/HOST): of the
//     idle workers a job may take, it takes N on the fewest hosts, then on the fewest racks:
//       1. the fewest hosts: hosts are taken largest first (most idle workers), and the last one
//          is the smallest that holds the rest (best fit, so a whole host stays free for a
//          bigger job);
//       2. the fewest racks: when one rack holds the job on that many hosts, the job takes that
//          rack (the one with the fewest idle workers of them, best fit); otherwise ties between
//          hosts of equal size go to a rack already used.
//     Remaining ties go to registration order (a host's or rack's oldest worker), so placement is
//     deterministic. Workers without a rack share one; a topology's host is its own key
//     ("r1/n1" and "r2/n1" are two hosts).
//   * Ranks 0..N-1 are consecutive per rack and per host: racks, then hosts within a rack, in
//     the order of their oldest chosen worker, and a host's workers in registration order. On
//     one host (or all on distinct unracked hosts) that is plain registration order.
//   * A job larger than the number of workers that could ever serve it stays queued (workers may
//     still register); it can be cancelled.
//   * Hot spares (JobSpec.spares = K): a first attempt is placed only when K more suitable
//     workers are idle beside its ranks (packed with them, ranks first); while it runs, K idle
//     workers (or as many as there are) are held for it and placed for nobody else, so a restart
//     after a lost worker finds one at once. A restart needs only its ranks.
#ifndef RINGLEADER_COORDINATOR_CORE_SCHEDULER_H_
#define RINGLEADER_COORDINATOR_CORE_SCHEDULER_H_

#include <string>
#include <vector>

#include "common/ids.h"
#include "coordinator/core/worker_registry.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// True when `worker` has what a rank of `spec` needs (see the policy above). Ignores state.
bool CanServe(const v1::JobSpec& spec, const WorkerRecord& worker);

struct QueuedJob {
  JobId id;
  const v1::JobSpec* spec;  // not owned
  // Worker names the job must run on (a doctor run); nullptr or empty = any. Not owned.
  const std::vector<std::string>* pinned = nullptr;
  // Idle workers it needs beyond its ranks before it is placed (its hot spares, JobSpec.spares):
  // the spec's for a first attempt, 0 for a restart, which runs on the spares it held.
  uint32_t spares = 0;
};

// A running job's hot spares: `count` IDLE workers that can serve `spec`, held for its restart.
struct SpareHold {
  JobId id;
  const v1::JobSpec* spec;  // not owned
  uint32_t count = 0;
};

// One placed job: ranks[r] runs rank r; `spares` are held for it (idle, placed with it).
struct Placement {
  JobId job;
  std::vector<WorkerRecord*> ranks;
  std::vector<WorkerRecord*> spares;
};

// Places jobs from the front of `queue` (oldest first) onto the IDLE workers among `workers`
// (registration order), each worker at most once, packed by topology (above), stopping at the
// first job that does not fit. Running jobs' `holds` are served first, each with up to its
// count of suitable idle workers (fewer when no more are idle), written to `held` (one Placement
// per hold, its workers in `spares`; may be null): those are placed for nobody. A queued job with
// spares is placed only when its ranks and its spares fit (packed together, ranks first).
std::vector<Placement> PlanFifo(const std::vector<QueuedJob>& queue,
                                const std::vector<WorkerRecord*>& workers,
                                const std::vector<SpareHold>& holds = {},
                                std::vector<Placement>* held = nullptr);

// Why queue[index] is still queued after PlanFifo placed the first `placed` jobs of `queue`:
//   the head: "needs 2 workers with a cuda device; 0 registered" / "world_size 9 > 3 registered
//   workers: register more workers or lower world_size" / "waiting for 2 idle workers: 1 of 3
//   suitable workers is idle (the others run jobs)"; a job behind the head: "behind job-000004
//   (strict FIFO: no job overtakes the queue's head)". Workers that are LOST do not count;
//   quarantined ones do not count either and are mentioned ("; 1 quarantined: ...").
// Workers held as hot spares for running jobs (PlanFifo's `held`) do not count as idle: "...
// (the others run jobs; 1 is held as hot spares by running jobs)".
std::string WhyQueued(const std::vector<QueuedJob>& queue, size_t index, size_t placed,
                      const std::vector<WorkerRecord*>& workers,
                      const std::vector<Placement>& held = {});

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_SCHEDULER_H_
