// The coordinator's table of worker daemons.
//
// Worker states (WorkerState in the proto):
//
//   RegisterWorker ──▶ IDLE ──assigned a rank──▶ BUSY ──job ended──▶ IDLE
//                       │                         │
//                       └──no heartbeat for heartbeat_timeout──▶ LOST ──RegisterWorker──▶ IDLE
//
// Quarantine is beside the state: a worker with a quarantine_reason is never placed (a doctor
// run that names it aside) and shows as QUARANTINED while IDLE; UncordonWorker clears it.
//
// Re-registering a name with a new incarnation removes the old record (a new id is issued; the
// quarantine and the crash streak carry over to the new one).
#ifndef RINGLEADER_COORDINATOR_CORE_WORKER_REGISTRY_H_
#define RINGLEADER_COORDINATOR_CORE_WORKER_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "common/topology.h"
#include "coordinator/core/attempt_id.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Completion of WaitAssignment: an assignment, nullopt when the wait ran out, or an error.
using AssignmentCallback =
    std::function<void(absl::StatusOr<std::optional<v1::Assignment>>)>;

// One registered worker daemon. Plain data owned by WorkerRegistry.
struct WorkerRecord {
  WorkerId id;            // "w-<sequence>"
  uint64_t sequence = 0;  // registration order; ranks are handed out in this order
  std::string name;
  std::string host;
  // Where it sits, as the scheduler packs ranks by it (common/topology.h): "RACK/HOST" as the
  // daemon registered it, or `host`.
  Topology topology;
  std::vector<v1::Device> devices;
  uint64_t incarnation = 0;
  absl::Time last_heartbeat;
  // The daemon's rank process's /proc state in its last heartbeat ("" = none or not said).
  std::string rank_process_state;
  v1::WorkerState state = v1::WORKER_STATE_IDLE;
  // Why it is quarantined, with the evidence ("" = it is not) and since when.
  std::string quarantine_reason;
  absl::Time quarantined_at;
  // Consecutive attempts in which its rank failed of its own (not a job error, not a peer's
  // consequence), with each failure's words; a success resets it (coordinator_preflight.cc).
  std::vector<std::string> crash_streak;

  // The attempt this worker runs a rank of (BUSY only).
  std::optional<AttemptId> attempt;
  Rank rank;
  // Assigned but not yet handed out by WaitAssignment.
  std::optional<v1::Assignment> undelivered;
  // Handed out but not yet acknowledged (see Coordinator::WaitAssignmentAsync).
  std::optional<v1::Assignment> offered;
  // Attempts this worker must abort; handed out (once) by the next Heartbeat.
  std::vector<v1::JobAttempt> aborts;

  // The pending WaitAssignment long poll, if any.
  AssignmentCallback waiter;
  absl::Time waiter_deadline;
};

// Not thread-safe: owned by the Coordinator and used under its lock. Record pointers stay valid
// until the record is removed.
class WorkerRegistry {
 public:
  // Adds a worker (state IDLE, heartbeat `now`) with the next id "w-1", "w-2", ...; its
  // topology is `host` (set it after).
  WorkerRecord* Add(std::string name, std::string host, std::vector<v1::Device> devices,
                    uint64_t incarnation, absl::Time now);
  // nullptr when unknown.
  WorkerRecord* Find(const WorkerId& id);
  const WorkerRecord* Find(const WorkerId& id) const;
  WorkerRecord* FindByName(absl::string_view name);
  // Forgets the record (its id becomes unknown).
  void Remove(const WorkerId& id);
  // Every record, oldest registration first.
  std::vector<WorkerRecord*> InRegistrationOrder();

 private:
  uint64_t next_sequence_ = 1;
  std::map<uint64_t, WorkerRecord> by_sequence_;
  absl::flat_hash_map<WorkerId, uint64_t> sequence_by_id_;
  absl::flat_hash_map<std::string, uint64_t> sequence_by_name_;
};

// The public view of a worker; `now` gives the heartbeat age.
v1::WorkerStatus ToWorkerStatus(const WorkerRecord& worker, absl::Time now);

// "worker NAME on HOST", as failure reasons name a worker.
std::string DescribeWorker(const WorkerRecord& worker);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_WORKER_REGISTRY_H_
