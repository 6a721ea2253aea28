// In-memory snapshots of a rank's training state: what a restart resumes from before any disk
// checkpoint (docs/recovery.md, "Snapshots in memory").
//
//   training thread                          writer thread
//   ──────────────                           ─────────────
//   step N done, SnapshotSchedule::Due(N)
//   CaptureState (a host copy) ── Offer ──▶  <dir>/step-N.snap (the checkpoint format: CRC,
//   (replaces one offered but not yet         written atomically), then all but the newest two
//    being written: the newest wins)          removed
//
// `dir` is the rank's snapshot directory, given by its worker daemon (--snapshot_dir, on tmpfs:
// /dev/shm by default): a snapshot outlives the rank process, not the host. Only strategies whose
// every rank holds the whole state (ddp) take snapshots, so every rank's snapshot of a step is the
// same state and any one of them can heal the others (resume.h).
#ifndef RINGLEADER_WORKER_RANK_SNAPSHOTS_H_
#define RINGLEADER_WORKER_RANK_SNAPSHOTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint.h"
#include "common/clock.h"

namespace ringleader {

// Snapshots kept per directory: the newest complete one survives a crash during the next write.
inline constexpr int kSnapshotsKept = 2;
// A snapshot may cost at most this share of a step (the automatic interval).
inline constexpr double kSnapshotBudget = 0.05;

// Free space a snapshot must leave on its file system: this much, and on tmpfs at least a
// quarter of it (memory the shared-memory collective's segments and the host need too).
inline constexpr uint64_t kSnapshotReserveBytes = uint64_t{64} << 20;

// "step-<step>.snap".
std::string SnapshotFileName(uint64_t step);

// OK when a snapshot of `bytes` fits in `dir`'s file system leaving the reserve above free;
// RESOURCE_EXHAUSTED naming the sizes, the directory and the fix otherwise (the writer then
// reports it and the rank stops taking snapshots). OK when the file system cannot be asked.
absl::Status CheckRoomForSnapshot(const std::string& dir, uint64_t bytes);

// When snapshots are due. `interval` > 0: after every `interval`-th step. 0 (automatic): after
// the first step, then after each snapshot the next is due ceil(cost / (5% of the step)) steps
// later (at least 1), so snapshots cost at most about 5% of the host's time per rank.
// Thread-safety: not thread-safe (the training thread's).
class SnapshotSchedule {
 public:
  explicit SnapshotSchedule(uint32_t interval) : interval_(interval) {}
  bool Due(uint64_t step) const;
  // A snapshot after `step` cost `cost` (the copy on the training thread and the writer's last
  // write); the step took `step_time`.
  void Record(uint64_t step, absl::Duration cost, absl::Duration step_time);
  // The steps between snapshots now.
  uint64_t current_interval() const { return interval_ > 0 ? interval_ : auto_interval_; }

 private:
  const uint32_t interval_;
  uint64_t auto_interval_ = 1;
  uint64_t next_ = 1;  // automatic: the next step a snapshot is due after
};

// Writes snapshots on a thread of its own. Thread-safety: thread-safe.
class SnapshotWriter {
 public:
  // `dir` is created (with its parents) at the first write. `clock` (not owned; null = the
  // real one) times the writes.
  explicit SnapshotWriter(std::string dir, Clock* clock = nullptr);
  ~SnapshotWriter();  // waits for the write in progress
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Hands `state` (its step is state.step) to the writer thread and returns at once: training
  // never waits for a write. At most one snapshot waits while another is written; a newer one
  // replaces it (then false: the older was dropped). The destructor still writes what waits.
  bool Offer(CheckpointData state);
  // Waits until no snapshot is pending. Returns the first write error since the last Flush
  // (the directory named), or OK.
  absl::Status Flush();

  // The first write error since the last call (or Flush), without waiting; OK when none.
  absl::Status TakeError();

  // How long the last write took (encoding, CRC, the file): the writer thread's share of the
  // host, which the automatic interval counts beside the copy.
  absl::Duration last_write() const;
  uint64_t written() const;
  uint64_t dropped() const;
  const std::string& dir() const { return dir_; }

 private:
  void Loop();
  absl::Status Write(const CheckpointData& state);

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::optional<CheckpointData> pending_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // pending_ or a write in progress
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  Clock* const clock_;
  absl::Duration last_write_ ABSL_GUARDED_BY(mu_);
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// A rank's snapshots through one attempt: the schedule and the writer. After each step, when a
// snapshot is due, `capture` copies the state (on the calling thread) and the writer takes it.
// Thread-safety: the training thread's.
class RankSnapshots {
 public:
  // Snapshots go to `dir` every `interval` steps (0: SnapshotSchedule's automatic interval);
  // `clock` (not owned; null = the real one) times the copies and writes.
  RankSnapshots(std::string dir, uint32_t interval, Clock* clock);

  // After `step`, which took `step_time`. Returns the error (a capture's, or an earlier write's)
  // that ended snapshots for this attempt, once; OK otherwise (also when none was due).
  absl::Status AfterStep(uint64_t step, absl::Duration step_time,
                         const std::function<absl::StatusOr<CheckpointData>()>& capture);
  // False once an error ended them.
  bool active() const { return writer_ != nullptr; }
  // "N snapshots in memory written (M replaced while waiting), every K step(s) at the end, the
  // last write took D" ("" once ended). Waits for the write in progress.
  std::string Summary();

 private:
  SnapshotSchedule schedule_;
  std::unique_ptr<SnapshotWriter> writer_;
  Clock* const clock_;
};

struct LocalSnapshot {
  uint64_t step = 0;
  std::string path;
  std::string bytes;    // the file as read (what a heal sends)
  CheckpointData data;  // decoded and verified
};

// The newest snapshot in `dir` that reads back whole and carries `fingerprint`; none when `dir`
// does not exist or holds none. Newer files that do not verify are named in `skipped` (may be
// null) and passed over. Errors: only when `dir` exists but cannot be listed.
absl::StatusOr<std::optional<LocalSnapshot>> FindLocalSnapshot(const std::string& dir,
                                                               const std::string& fingerprint,
                                                               std::vector<std::string>* skipped);

// Removes `dir` and its snapshots (best effort: a job that ended needs them no more).
void RemoveSnapshots(const std::string& dir);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_SNAPSHOTS_H_
