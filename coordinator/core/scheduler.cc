#include "coordinator/core/scheduler.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/spec_kinds.h"

namespace ringleader {

bool CanServe(const v1::JobSpec& spec, const WorkerRecord& worker) {
  if (BackendOf(spec) != Backend::kNccl) return true;
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

std::string WhyQueued(const std::vector<QueuedJob>& queue, size_t index, size_t placed,
                      const std::vector<WorkerRecord*>& workers) {
  if (index > placed) {
    return absl::StrCat("behind ", queue[placed].id.value(),
                        " (strict FIFO: no job overtakes the queue's head)");
  }
  const v1::JobSpec& spec = *queue[index].spec;
  const uint32_t needed = spec.world_size();
  size_t suitable = 0;
  size_t idle = 0;
  for (const WorkerRecord* worker : workers) {
    if (worker->state == v1::WORKER_STATE_LOST || !CanServe(spec, *worker)) continue;
    ++suitable;
    if (worker->state == v1::WORKER_STATE_IDLE) ++idle;
  }
  const bool gpu = BackendOf(spec) == Backend::kNccl;
  if (suitable < needed) {
    if (gpu) {
      return absl::StrCat("needs ", needed, " workers with a cuda device; ", suitable,
                          " registered: start a worker daemon with --gpu N on each GPU");
    }
    return absl::StrCat("world_size ", needed, " > ", suitable,
                        " registered workers: register more workers or lower world_size");
  }
  return absl::StrCat("waiting for ", needed, " idle ", gpu ? "GPU " : "", "workers: ", idle,
                      " of ", suitable, " suitable workers ", idle == 1 ? "is" : "are",
                      " idle (the others run jobs)");
}

}  // namespace ringleader
