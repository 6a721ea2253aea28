#include "coordinator/core/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

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

// The idle workers of one host (one topology) that a job may take.
struct HostGroup {
  const Topology* topology;            // of its first worker
  size_t order;                        // index of its first worker among the candidates
  std::vector<WorkerRecord*> workers;  // registration order
  size_t Capacity() const { return workers.size(); }
};

// The fewest hosts of `pool` (indices into `hosts`) holding `needed` workers: hosts largest first,
// the last the smallest holding the rest; ties to a rack already used, then to order. Returns (host
// index, workers taken from it). `pool` holds at least `needed` workers.
std::vector<std::pair<size_t, size_t>> ChooseHosts(const std::vector<HostGroup>& hosts,
                                                   const std::vector<size_t>& pool, size_t needed) {
  std::vector<std::pair<size_t, size_t>> chosen;
  absl::flat_hash_set<size_t> taken;
  absl::flat_hash_set<std::string> racks_used;
  size_t remaining = needed;
  while (remaining > 0) {
    auto rack_unused = [&](size_t h) {
      return racks_used.contains(hosts[h].topology->rack) ? 0 : 1;
    };
    // A host that holds the rest: the smallest one.
    std::optional<size_t> fit;
    for (size_t h : pool) {
      if (taken.contains(h) || hosts[h].Capacity() < remaining) continue;
      if (!fit.has_value() ||
          std::make_tuple(hosts[h].Capacity(), rack_unused(h), hosts[h].order) <
              std::make_tuple(hosts[*fit].Capacity(), rack_unused(*fit), hosts[*fit].order)) {
        fit = h;
      }
    }
    if (fit.has_value()) {
      chosen.emplace_back(*fit, remaining);
      break;
    }
    // None does: the largest one, whole.
    std::optional<size_t> largest;
    for (size_t h : pool) {
      if (taken.contains(h)) continue;
      if (!largest.has_value() ||
          std::make_tuple(-static_cast<int64_t>(hosts[h].Capacity()), rack_unused(h),
                          hosts[h].order) <
              std::make_tuple(-static_cast<int64_t>(hosts[*largest].Capacity()),
                              rack_unused(*largest), hosts[*largest].order)) {
        largest = h;
      }
    }
    if (!largest.has_value()) return {};  // cannot happen: the pool holds enough
    taken.insert(*largest);
    racks_used.insert(hosts[*largest].topology->rack);
    chosen.emplace_back(*largest, hosts[*largest].Capacity());
    remaining -= hosts[*largest].Capacity();
  }
  return chosen;
}

// How many hosts ChooseHosts takes from `pool`: the largest first until `needed` are held.
size_t HostsNeeded(const std::vector<HostGroup>& hosts, const std::vector<size_t>& pool,
                   size_t needed) {
  std::vector<size_t> capacities;
  for (size_t h : pool) capacities.push_back(hosts[h].Capacity());
  std::sort(capacities.rbegin(), capacities.rend());
  size_t held = 0;
  for (size_t i = 0; i < capacities.size(); ++i) {
    held += capacities[i];
    if (held >= needed) return i + 1;
  }
  return std::numeric_limits<size_t>::max();
}

// `needed` of `candidates` (registration order), packed by topology (see scheduler.h), in rank
// order. Empty when there are fewer candidates than needed.
std::vector<WorkerRecord*> Pack(const std::vector<WorkerRecord*>& candidates, size_t needed) {
  if (candidates.size() < needed) return {};
  if (needed == 0) return {};
  // Hosts and racks in the order of their oldest candidate.
  std::vector<HostGroup> hosts;
  std::map<std::pair<std::string, std::string>, size_t> host_index;
  std::vector<std::string> rack_names;
  std::map<std::string, std::vector<size_t>> rack_hosts;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Topology& topology = candidates[i]->topology;
    auto [it, inserted] =
        host_index.emplace(std::make_pair(topology.rack, topology.host), hosts.size());
    if (inserted) {
      hosts.push_back(HostGroup{&topology, i, {}});
      auto [rack, new_rack] = rack_hosts.try_emplace(topology.rack);
      if (new_rack) rack_names.push_back(topology.rack);
      rack->second.push_back(it->second);
    }
    hosts[it->second].workers.push_back(candidates[i]);
  }
  std::vector<size_t> all(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) all[h] = h;
  const size_t fewest_hosts = HostsNeeded(hosts, all, needed);
  // One rack that holds the job on that many hosts: the one with the fewest idle workers.
  const std::vector<size_t>* pool = &all;
  size_t pool_capacity = candidates.size() + 1;
  for (const std::string& rack : rack_names) {
    const std::vector<size_t>& in_rack = rack_hosts.at(rack);
    if (HostsNeeded(hosts, in_rack, needed) != fewest_hosts) continue;
    size_t capacity = 0;
    for (size_t h : in_rack) capacity += hosts[h].Capacity();
    if (capacity < pool_capacity) {
      pool = &in_rack;
      pool_capacity = capacity;
    }
  }
  std::vector<std::pair<size_t, size_t>> chosen = ChooseHosts(hosts, *pool, needed);
  // Rank order: racks, then hosts, by their oldest chosen worker (hosts are numbered by theirs).
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> rack_order;
  for (const auto& [h, count] : chosen) {
    const std::string& rack = hosts[h].topology->rack;
    if (std::find(rack_order.begin(), rack_order.end(), rack) == rack_order.end()) {
      rack_order.push_back(rack);
    }
  }
  std::vector<WorkerRecord*> ranks;
  for (const std::string& rack : rack_order) {
    for (const auto& [h, count] : chosen) {
      if (hosts[h].topology->rack != rack) continue;
      ranks.insert(ranks.end(), hosts[h].workers.begin(), hosts[h].workers.begin() + count);
    }
  }
  return ranks;
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
                                const std::vector<WorkerRecord*>& workers,
                                const std::vector<SpareHold>& holds,
                                std::vector<Placement>* held) {
  std::vector<Placement> plan;
  absl::flat_hash_set<const WorkerRecord*> taken;
  auto candidates_for = [&](const QueuedJob& job) {
    std::vector<WorkerRecord*> candidates;
    for (WorkerRecord* worker : workers) {
      if (worker->state != v1::WORKER_STATE_IDLE || taken.contains(worker)) continue;
      if (!MayPlace(job, *worker)) continue;
      candidates.push_back(worker);
    }
    return candidates;
  };
  for (const SpareHold& hold : holds) {
    Placement spares{hold.id, {}, {}};
    for (WorkerRecord* worker : candidates_for(QueuedJob{hold.id, hold.spec})) {
      if (spares.spares.size() >= hold.count) break;
      spares.spares.push_back(worker);
      taken.insert(worker);
    }
    if (held != nullptr) held->push_back(std::move(spares));
  }
  for (const QueuedJob& job : queue) {
    const size_t world = job.spec->world_size();
    std::vector<WorkerRecord*> packed = Pack(candidates_for(job), world + job.spares);
    // Strict FIFO: a head that does not fit blocks everything behind it.
    if (packed.size() < world + job.spares) break;
    Placement placement{job.id, {}, {}};
    placement.ranks.assign(packed.begin(), packed.begin() + static_cast<long>(world));
    placement.spares.assign(packed.begin() + static_cast<long>(world), packed.end());
    for (const WorkerRecord* worker : packed) taken.insert(worker);
    plan.push_back(std::move(placement));
  }
  return plan;
}

std::string WhyQueued(const std::vector<QueuedJob>& queue, size_t index, size_t placed,
                      const std::vector<WorkerRecord*>& workers,
                      const std::vector<Placement>& held) {
  if (index > placed) {
    return absl::StrCat("behind ", queue[placed].id.value(),
                        " (strict FIFO: no job overtakes the queue's head)");
  }
  const v1::JobSpec& spec = *queue[index].spec;
  const uint32_t needed = spec.world_size() + queue[index].spares;
  absl::flat_hash_set<const WorkerRecord*> holding;
  for (const Placement& hold : held) holding.insert(hold.spares.begin(), hold.spares.end());
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
    if (worker->state == v1::WORKER_STATE_IDLE && !holding.contains(worker)) ++idle;
  }
  size_t held_here = 0;
  for (const WorkerRecord* worker : holding) held_here += MayPlace(queue[index], *worker) ? 1 : 0;
  const std::string spares_note =
      queue[index].spares == 0
          ? ""
          : absl::StrCat(" (", spec.world_size(), " ranks and ", queue[index].spares,
                         " hot spare", queue[index].spares == 1 ? "" : "s", ")");
  const std::string held_note =
      held_here == 0 ? ""
                     : absl::StrCat("; ", held_here, held_here == 1 ? " is" : " are",
                                    " held as hot spares by running jobs");
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
    if (queue[index].spares > 0) {
      return absl::StrCat("world_size ", spec.world_size(), " + spares ", queue[index].spares,
                          " > ", suitable,
                          " registered workers: register more workers or lower spares",
                          quarantine_note);
    }
    return absl::StrCat("world_size ", needed, " > ", suitable,
                        " registered workers: register more workers or lower world_size",
                        quarantine_note);
  }
  return absl::StrCat("waiting for ", needed, " idle ", gpu ? "GPU " : "", "workers",
                      spares_note, ": ", idle, " of ", suitable, " suitable workers ",
                      idle == 1 ? "is" : "are", " idle (the others run jobs", held_note, ")",
                      quarantine_note);
}

}  // namespace ringleader
