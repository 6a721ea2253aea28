#include "coordinator/scheduler.h"

#include "absl/container/flat_hash_set.h"

namespace ringleader {

bool CanServe(const v1::JobSpec& spec, const WorkerRecord& worker) {
  if (spec.backend() != "nccl") return true;
  for (const v1::Device& device : worker.devices) {
    if (device.kind() == "cuda") return true;
  }
  return false;
}

std::vector<Placement> PlanFifo(const std::vector<QueuedJob>& queue,
                                const std::vector<WorkerRecord*>& workers) {
  std::vector<Placement> plan;
  absl::flat_hash_set<const WorkerRecord*> taken;
  for (const QueuedJob& job : queue) {
    Placement placement{job.id, {}};
    for (WorkerRecord* worker : workers) {
      if (placement.ranks.size() == job.spec->world_size()) break;
      if (worker->state != v1::WORKER_STATE_IDLE || taken.contains(worker)) continue;
      if (!CanServe(*job.spec, *worker)) continue;
      placement.ranks.push_back(worker);
    }
    // Strict FIFO: a head that does not fit blocks everything behind it.
    if (placement.ranks.size() < job.spec->world_size()) break;
    for (const WorkerRecord* worker : placement.ranks) taken.insert(worker);
    plan.push_back(std::move(placement));
  }
  return plan;
}

}  // namespace ringleader
