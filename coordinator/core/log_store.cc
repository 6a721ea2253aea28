#include "coordinator/core/log_store.h"

#include <algorithm>
#include <utility>

namespace ringleader {
namespace {

// Appends are stored in pieces of at most this many bytes, so dropping a rank's oldest bytes
// moves at most one piece's worth of memory.
constexpr size_t kPieceBytes = size_t{64} << 10;

}  // namespace

const LogStore::RankLog* LogStore::FindRank(const JobId& job, uint64_t generation,
                                            uint32_t rank) const {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return nullptr;
  auto g = j->second.generations.find(generation);
  if (g == j->second.generations.end()) return nullptr;
  auto r = g->second.ranks.find(rank);
  return r == g->second.ranks.end() ? nullptr : &r->second;
}

void LogStore::Append(const JobId& job, uint64_t generation, uint32_t rank, uint32_t world_size,
                      uint64_t offset, absl::string_view data) {
  JobLog& j = jobs_[job];
  GenerationLog& g = j.generations[generation];
  RankLog& r = g.ranks[rank];
  const size_t cap =
      std::max<size_t>(1, std::min(options_.max_bytes_per_rank,
                                   options_.max_bytes_per_job / std::max<uint32_t>(1, world_size)));
  const uint64_t end = offset + data.size();
  if (end <= r.end) return;  // a retry: every byte was received already
  if (offset < r.end) {
    data.remove_prefix(r.end - offset);
    offset = r.end;
  }
  if (data.size() > cap) {  // only its last bytes could be kept anyway
    offset += data.size() - cap;
    data.remove_prefix(data.size() - cap);
  }
  while (!data.empty()) {
    size_t take;
    if (!r.pieces.empty() && r.pieces.back().end() == offset &&
        r.pieces.back().data.size() < kPieceBytes) {
      take = std::min(kPieceBytes - r.pieces.back().data.size(), data.size());
      r.pieces.back().data.append(data.data(), take);
    } else {
      take = std::min(kPieceBytes, data.size());
      r.pieces.push_back(Piece{offset, std::string(data.substr(0, take))});
    }
    offset += take;
    data.remove_prefix(take);
    r.bytes += take;
    g.bytes += take;
    j.bytes += take;
    bytes_ += take;
  }
  r.end = end;
  if (r.bytes > cap) DropOldest(&j, &g, &r, r.bytes - cap);
  if (j.last_append != 0) by_recency_.erase(j.last_append);
  j.last_append = ++appends_;
  by_recency_[j.last_append] = job;
  if (j.bytes > options_.max_bytes_per_job) TrimJob(&j, j.bytes - options_.max_bytes_per_job);
  EnforceTotal();
}

void LogStore::DropOldest(JobLog* job, GenerationLog* generation, RankLog* rank, size_t n) {
  n = std::min(n, rank->bytes);
  rank->bytes -= n;
  generation->bytes -= n;
  job->bytes -= n;
  bytes_ -= n;
  while (n > 0) {
    Piece& front = rank->pieces.front();
    if (front.data.size() <= n) {
      n -= front.data.size();
      rank->pieces.pop_front();
    } else {
      front.data.erase(0, n);
      front.offset += n;
      n = 0;
    }
  }
}

void LogStore::TrimJob(JobLog* job, size_t n) {
  while (n > 0 && job->bytes > 0) {
    GenerationLog* oldest = nullptr;
    for (auto& [number, generation] : job->generations) {
      if (generation.bytes > 0) {
        oldest = &generation;
        break;
      }
    }
    RankLog* largest = nullptr;
    for (auto& [rank, log] : oldest->ranks) {
      if (largest == nullptr || log.bytes > largest->bytes) largest = &log;
    }
    const size_t k = std::min(n, largest->bytes);
    DropOldest(job, oldest, largest, k);
    n -= k;
  }
}

void LogStore::EnforceTotal() {
  while (bytes_ > options_.max_bytes_total && !by_recency_.empty()) {
    auto least_recent = by_recency_.begin();
    JobLog& victim = jobs_[least_recent->second];
    TrimJob(&victim, bytes_ - options_.max_bytes_total);
    if (victim.bytes == 0) {
      victim.last_append = 0;
      by_recency_.erase(least_recent);
    }
  }
}

std::optional<v1::LogChunk> LogStore::Read(const JobId& job, uint64_t generation, uint32_t rank,
                                           std::optional<uint64_t> after, size_t max_bytes) const {
  const RankLog* r = FindRank(job, generation, rank);
  if (r == nullptr) return std::nullopt;
  const uint64_t from = after.value_or(r->pieces.empty() ? r->end : r->pieces.front().offset);
  if (from >= r->end) return std::nullopt;
  v1::LogChunk chunk;
  chunk.set_rank(rank);
  // The first piece holding a byte at or after `from`.
  auto it = std::lower_bound(r->pieces.begin(), r->pieces.end(), from,
                             [](const Piece& piece, uint64_t at) { return piece.end() <= at; });
  if (it == r->pieces.end()) {  // nothing kept past `from`: all of it was dropped
    chunk.set_offset(r->end);
    chunk.set_skipped(r->end - from);
    return chunk;
  }
  uint64_t at = std::max(from, it->offset);
  chunk.set_offset(at);
  chunk.set_skipped(at - from);
  std::string* data = chunk.mutable_data();
  for (; it != r->pieces.end() && it->offset <= at && data->size() < max_bytes; ++it) {
    const size_t take = std::min<uint64_t>(it->end() - at, max_bytes - data->size());
    data->append(it->data, at - it->offset, take);
    at += take;
  }
  if (data->empty() && chunk.skipped() == 0) return std::nullopt;
  return chunk;
}

bool LogStore::HasNew(const JobId& job, uint64_t generation, uint32_t rank,
                      std::optional<uint64_t> after) const {
  const RankLog* r = FindRank(job, generation, rank);
  if (r == nullptr) return false;
  const uint64_t from = after.value_or(r->pieces.empty() ? r->end : r->pieces.front().offset);
  return from < r->end;
}

std::vector<uint32_t> LogStore::Ranks(const JobId& job, uint64_t generation) const {
  std::vector<uint32_t> ranks;
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return ranks;
  auto g = j->second.generations.find(generation);
  if (g == j->second.generations.end()) return ranks;
  for (const auto& [rank, log] : g->second.ranks) ranks.push_back(rank);
  return ranks;
}

void LogStore::RemoveJob(const JobId& job) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return;
  if (j->second.last_append != 0) by_recency_.erase(j->second.last_append);
  bytes_ -= j->second.bytes;
  jobs_.erase(j);
}

size_t LogStore::job_bytes(const JobId& job) const {
  auto j = jobs_.find(job);
  return j == jobs_.end() ? 0 : j->second.bytes;
}

}  // namespace ringleader
