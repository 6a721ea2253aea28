#include "coordinator/core/worker_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

WorkerRecord* WorkerRegistry::Add(std::string name, std::string host,
                                  std::vector<v1::Device> devices, uint64_t incarnation,
                                  absl::Time now) {
  const uint64_t sequence = next_sequence_++;
  WorkerRecord& worker = by_sequence_[sequence];
  worker.id = WorkerId(absl::StrCat("w-", sequence));
  worker.sequence = sequence;
  worker.name = std::move(name);
  worker.host = std::move(host);
  worker.topology.host = worker.host;
  worker.devices = std::move(devices);
  worker.incarnation = incarnation;
  worker.last_heartbeat = now;
  sequence_by_id_[worker.id] = sequence;
  sequence_by_name_[worker.name] = sequence;
  return &worker;
}

WorkerRecord* WorkerRegistry::Find(const WorkerId& id) {
  return const_cast<WorkerRecord*>(static_cast<const WorkerRegistry*>(this)->Find(id));
}

const WorkerRecord* WorkerRegistry::Find(const WorkerId& id) const {
  auto it = sequence_by_id_.find(id);
  return it == sequence_by_id_.end() ? nullptr : &by_sequence_.at(it->second);
}

WorkerRecord* WorkerRegistry::FindByName(absl::string_view name) {
  auto it = sequence_by_name_.find(name);
  return it == sequence_by_name_.end() ? nullptr : &by_sequence_.at(it->second);
}

void WorkerRegistry::Remove(const WorkerId& id) {
  auto it = sequence_by_id_.find(id);
  if (it == sequence_by_id_.end()) return;
  const uint64_t sequence = it->second;
  sequence_by_id_.erase(it);
  auto by_name = sequence_by_name_.find(by_sequence_.at(sequence).name);
  if (by_name != sequence_by_name_.end() && by_name->second == sequence) {
    sequence_by_name_.erase(by_name);
  }
  by_sequence_.erase(sequence);
}

std::vector<WorkerRecord*> WorkerRegistry::InRegistrationOrder() {
  std::vector<WorkerRecord*> all;
  all.reserve(by_sequence_.size());
  for (auto& [sequence, worker] : by_sequence_) all.push_back(&worker);
  return all;
}

v1::WorkerStatus ToWorkerStatus(const WorkerRecord& worker, absl::Time now) {
  v1::WorkerStatus status;
  status.set_worker_id(worker.id.value());
  status.set_name(worker.name);
  status.set_host(worker.host);
  status.set_topology(FormatTopology(worker.topology));
  for (const v1::Device& device : worker.devices) *status.add_devices() = device;
  status.set_state(worker.state);
  if (!worker.quarantine_reason.empty()) {
    if (worker.state == v1::WORKER_STATE_IDLE) status.set_state(v1::WORKER_STATE_QUARANTINED);
    status.set_quarantine_reason(worker.quarantine_reason);
    status.set_quarantined_unix_ms(absl::ToUnixMillis(worker.quarantined_at));
  }
  if (worker.attempt.has_value()) {
    status.set_job_id(worker.attempt->job.value());
    status.set_rank(worker.rank.value());
  }
  status.set_heartbeat_age_ms(absl::ToInt64Milliseconds(now - worker.last_heartbeat));
  status.set_incarnation(worker.incarnation);
  return status;
}

std::string DescribeWorker(const WorkerRecord& worker) {
  return absl::StrCat("worker ", worker.name, " on ", worker.host);
}

}  // namespace ringleader
