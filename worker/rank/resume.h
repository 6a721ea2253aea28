// Where a rank's training starts: the job's checkpoint directory, and — for a restarted
// attempt — the periodic checkpoint every rank of the new generation resumes from.
//
//   generation 1, or no checkpoint_dir   → start from the seed's weights (step 0)
//   generation G > 1:
//     rank 0  FindResumePoint(<checkpoint_dir>/<job>) → the newest checkpoint that reads back
//             whole; publishes its path (or "" for none) under kResumeKey in the attempt's
//             key-value store
//     rank r  waits for that key and reads the same file (checkpoint_dir must be storage every
//             rank's host reads: a shared file system for multi-host jobs)
//
// Every rank thus resumes from the same step even when a newer file is corrupt or being
// copied: rank 0 alone chooses, and the others follow.
//
// Snapshots in memory (snapshots.h) come first: with a snapshot directory every rank of a
// restarted attempt publishes the newest snapshot step it holds (kSnapshotStepKey + rank);
// rank 0 takes the newest step S any rank holds when it is at least the newest checkpoint's,
// names the lowest rank holding it as the source and publishes "S source heal" under
// kSnapshotResumeKey (heal = 1 when some rank lacks S). A rank holding S resumes from its own
// copy; the others start from the seed's weights and receive S's bytes from the source over the
// collective once it is up (heal.h), never from disk. A sharded checkpoint is chosen only when
// every shard matches its manifest (checkpoint/checkpoint_series.h); the decision then holds the
// manifest, and each rank reads its shards from beside it (starting_state.h).
#ifndef RINGLEADER_WORKER_RANK_RESUME_H_
#define RINGLEADER_WORKER_RANK_RESUME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"
#include "proto/ringleader.pb.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

// Key of the attempt's store under which rank 0 publishes the checkpoint path.
inline constexpr char kResumeKey[] = "resume/checkpoint";
// Keys of the snapshot decision: each rank's newest snapshot step (+ the rank; "" for none),
// and rank 0's choice ("<step> <source rank> <heal 0|1>", "" for none).
inline constexpr char kSnapshotStepKey[] = "resume/snapshot-of-rank-";
inline constexpr char kSnapshotResumeKey[] = "resume/snapshot";

// "<checkpoint_dir>/<job id made safe as a file name>": where the job's checkpoints live
// ("" when the spec has no checkpoint_dir).
std::string JobCheckpointDir(const v1::JobSpec& spec, const std::string& job_id);

// That directory, opened once for the checkpoint series (checkpoint/file_io.h: DirectoryHandle,
// kind "checkpoint"): the spec's checkpoint_dir is opened with O_NOFOLLOW, then the job's
// directory relative to it with O_NOFOLLOW, so a symbolic link swapped in for either after the
// worker checked its allowed roots is refused, and the writes and reads through the handle stay
// in the directories opened. `create`: missing directories are made (rank 0, before writing).
// Errors: FAILED_PRECONDITION when the spec has no checkpoint_dir, or when either directory is
// a symbolic link ("checkpoint directory <path> is a symbolic link ...") or not a directory;
// NOT_FOUND (without `create`) when either does not exist; errno-derived codes otherwise.
absl::StatusOr<DirectoryHandle> OpenJobCheckpointDir(const v1::JobSpec& spec,
                                                     const std::string& job_id, bool create);

// A job whose ranks take snapshots (the same on every rank: the spec and its strategy decide).
struct SnapshotTier {
  std::string dir;  // this rank's snapshot directory; "" when its worker keeps none
};

struct ResumeDecision {
  std::optional<CheckpointData> checkpoint;  // none: start from step 0 (or from the heal)
  std::string path;                          // the checkpoint's path, when there is one
  std::vector<std::string> skipped;          // newer files this rank could not use
  // Resuming from a snapshot in memory of step `snapshot_step`. `heal`: some rank lacks it and
  // every rank takes part in BroadcastBytes from `heal_source`, which keeps the snapshot's file
  // in `snapshot_bytes`; a rank without `checkpoint` rebuilds its model from what it receives.
  bool from_snapshot = false;
  uint64_t snapshot_step = 0;
  bool heal = false;
  int heal_source = -1;
  std::string snapshot_bytes;
};

// The decision for this rank of `assignment` (see the file comment); `spec` has its defaults
// applied, `fingerprint` is the spec's. `timeout` bounds rank r's wait for rank 0. Rank 0 reads
// the directory through OpenJobCheckpointDir (a missing one holds nothing to resume from);
// rank r reads the published file with O_NOFOLLOW.
// `snapshots`: null when the job takes no snapshots. Errors: rank 0: OpenJobCheckpointDir's other than NOT_FOUND (FAILED_PRECONDITION for a
// symbolic link); the store's (DEADLINE_EXCEEDED when rank 0 never published); rank r: the read
// of the published file (FAILED_PRECONDITION when it is a symbolic link), FAILED_PRECONDITION
// "... is not readable on this rank's host: ..." when it does not exist here (a checkpoint_dir
// that is not shared).
absl::StatusOr<ResumeDecision> DecideResume(const v1::Assignment& assignment,
                                            const v1::JobSpec& spec,
                                            const std::string& fingerprint, KeyValueStore* store,
                                            absl::Duration timeout,
                                            const SnapshotTier* snapshots = nullptr);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_RESUME_H_
