#include "coordinator/core/scheduler.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec_kinds.h"

namespace ringleader {

namespace {

bool IsPinned(const QueuedJob& job, const WorkerRecord& worker) {
  return job.pinned != nullptr &&
         std::find(job.pinned->begin(), job.pinned->end(), worker.name) != job.pinned->end();
}

// Whether `job` may be placed on `worker` at all (its state aside).
bool MayPlace(const QueuedJob& job, const WorkerRecord& worker) {
  if (job.pinned != nullptr && !job.pinned->empty()) return IsPinned(job, worker);
  return worker.quarantine_reason.empty() && CanServe(*job.spec, worker);
}

}  // namespace

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
      if (!MayPlace(job, *worker)) continue;
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
  std::vector<std::string> quarantined;
  for (const WorkerRecord* worker : workers) {
    if (worker->state == v1::WORKER_STATE_LOST || !CanServe(spec, *worker)) continue;
    if (!MayPlace(queue[index], *worker)) {
      if (!worker->quarantine_reason.empty()) quarantined.push_back(worker->name);
      continue;
    }
    ++suitable;
    if (worker->state == v1::WORKER_STATE_IDLE) ++idle;
  }
  const std::string quarantine_note =
      quarantined.empty()
          ? ""
          : absl::StrCat("; ", quarantined.size(), " quarantined (", absl::StrJoin(quarantined, ", "),
                         "): see `ringleader workers`, release with `ringleader uncordon`");
  const bool gpu = BackendOf(spec) == Backend::kNccl;
  if (suitable < needed) {
    if (gpu) {
      return absl::StrCat("needs ", needed, " workers with a cuda device; ", suitable,
                          " registered: start a worker daemon with --gpu N on each GPU",
                          quarantine_note);
    }
    return absl::StrCat("world_size ", needed, " > ", suitable,
                        " registered workers: register more workers or lower world_size",
                        quarantine_note);
  }
  return absl::StrCat("waiting for ", needed, " idle ", gpu ? "GPU " : "", "workers: ", idle,
                      " of ", suitable, " suitable workers ", idle == 1 ? "is" : "are",
                      " idle (the others run jobs)", quarantine_note);
}

}  // namespace ringleader
