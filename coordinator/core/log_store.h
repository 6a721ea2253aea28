// The ranks' output (stdout and stderr) as the worker daemons ship it (AppendLogs), kept for
// readers (GetLogs, `ringleader logs`): per job, per (generation, rank), the most recent bytes.
//
// In memory only: the job store does not persist logs, so a restarted coordinator starts with
// none (the daemons go on shipping at their offsets; a reader is told the earlier bytes were not
// kept).
//
// Offsets: every byte of a rank's output in one attempt has an offset, counted by its daemon
// from 0 at the start of the rank process. An append at offsets already received is a retry:
// only its bytes past the end are kept. An append past the end leaves a gap (bytes never
// received); a reader asking for bytes that are not kept, evicted or never received, is told how
// many it skipped.
//
// Bounds (LogStoreOptions), so memory does not grow with the output:
//   rank   at most min(max_bytes_per_rank, max_bytes_per_job / world size) bytes: its oldest
//          bytes go first (the newest attempt alone never exceeds the job's budget);
//   job    at most max_bytes_per_job: its oldest generations are trimmed first (the largest
//          rank's oldest bytes first);
//   total  at most max_bytes_total over every job: the job least recently appended to is
//          trimmed first.
// An append larger than its rank's budget keeps only its last bytes.
//
// Not thread-safe: owned by the Coordinator and used under its lock.
#ifndef RINGLEADER_COORDINATOR_CORE_LOG_STORE_H_
#define RINGLEADER_COORDINATOR_CORE_LOG_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ids.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Completion of GetLogs.
using LogsCallback = std::function<void(absl::StatusOr<v1::GetLogsResponse>)>;

struct LogStoreOptions {
  // Bytes kept per rank of an attempt (the most recent).
  size_t max_bytes_per_rank = size_t{1} << 20;
  // Bytes kept per job, over all its generations (the oldest generations go first).
  size_t max_bytes_per_job = size_t{8} << 20;
  // Bytes kept over all jobs (the job least recently appended to goes first).
  size_t max_bytes_total = size_t{256} << 20;
};

class LogStore {
 public:
  explicit LogStore(LogStoreOptions options) : options_(options) {}

  // Bytes [offset, offset + data.size()) of `rank`'s output in `generation` of `job`, a job of
  // `world_size` ranks (which sets the rank's share of the job's budget).
  void Append(const JobId& job, uint64_t generation, uint32_t rank, uint32_t world_size,
              uint64_t offset, absl::string_view data);

  // The rank's output from `after` (nullopt: from the oldest byte kept): one contiguous run of
  // at most `max_bytes` bytes, with `skipped` = the bytes from `after` up to the run that are
  // not kept. nullopt when there is nothing past `after` (no byte, nothing skipped), or when
  // `max_bytes` is 0 and nothing was skipped.
  std::optional<v1::LogChunk> Read(const JobId& job, uint64_t generation, uint32_t rank,
                                   std::optional<uint64_t> after, size_t max_bytes) const;

  // Whether Read(..., after, max_bytes > 0) would return a chunk.
  bool HasNew(const JobId& job, uint64_t generation, uint32_t rank,
              std::optional<uint64_t> after) const;

  // Ranks of the generation that appended anything, ascending.
  std::vector<uint32_t> Ranks(const JobId& job, uint64_t generation) const;

  // Drops everything kept of `job` (an archived job; no-op when there is nothing).
  void RemoveJob(const JobId& job);

  // Bytes kept: in all, of one job.
  size_t bytes() const { return bytes_; }
  size_t job_bytes(const JobId& job) const;

 private:
  // Bytes [offset, offset + data.size()) of a rank's output.
  struct Piece {
    uint64_t offset = 0;
    std::string data;
    uint64_t end() const { return offset + data.size(); }
  };
  struct RankLog {
    std::deque<Piece> pieces;  // ascending, disjoint; a space between two is a gap
    uint64_t end = 0;          // offset after the last byte received
    size_t bytes = 0;          // bytes kept
  };
  struct GenerationLog {
    std::map<uint32_t, RankLog> ranks;
    size_t bytes = 0;
  };
  struct JobLog {
    std::map<uint64_t, GenerationLog> generations;
    size_t bytes = 0;
    uint64_t last_append = 0;  // key in by_recency_ (0 = not in it)
  };

  const RankLog* FindRank(const JobId& job, uint64_t generation, uint32_t rank) const;
  // Drops the oldest `n` bytes (at most what it keeps) of `rank`, keeping the counts.
  void DropOldest(JobLog* job, GenerationLog* generation, RankLog* rank, size_t n);
  // Drops `n` bytes of `job`: its oldest generations first, the largest rank first.
  void TrimJob(JobLog* job, size_t n);
  void EnforceTotal();

  const LogStoreOptions options_;
  absl::flat_hash_map<JobId, JobLog> jobs_;
  // Jobs by their last append (a sequence number), least recent first.
  std::map<uint64_t, JobId> by_recency_;
  uint64_t appends_ = 0;
  size_t bytes_ = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_LOG_STORE_H_
