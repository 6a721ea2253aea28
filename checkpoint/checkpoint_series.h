// A job's periodic checkpoints: one directory per job holding step-<N>.ckpt files (the step
// zero-padded to 12 digits so names sort by step), written by rank 0 every
// checkpoint_interval_steps, the newest `keep_last` kept; and the choice of the checkpoint a
// restarted attempt resumes from.
//
//   <checkpoint_dir>/<job>/step-000000000040.ckpt
//   <checkpoint_dir>/<job>/step-000000000050.ckpt   ← newest: resumed from, unless corrupt
//   <checkpoint_dir>/<job>/final.ckpt               (the end of a successful job; not resumed)
//
// A periodic checkpoint may be a sharded one's manifest (sharded_checkpoint.h): its shard files
// step-<N>.shard-<r>-of-<W> sit next to it, are deleted with it, and must all be whole for it
// to be resumed from.
//
// Each file is written atomically (checkpoint.h), so a crash while writing leaves the previous
// files whole. A file damaged later (disk, a partial copy) fails its CRC; the resume then
// takes the newest file that reads back whole and names the ones it skipped.
//
// Symbolic links: each call opens the directory once (DirectoryHandle, file_io.h: a directory
// that is a symbolic link is refused) and does everything else relative to it — writing,
// listing, reading the files' headers and deleting the oldest (unlinkat) — so a link swapped
// in meanwhile is never followed; a file that is a link is never read (a rotation leaves it, a
// resume skips it naming why). The overloads taking a DirectoryHandle let a caller open the
// directory once for a whole job (the rank does, see worker/rank/resume.h).
//
// Thread-safety: free functions; one writer per directory (rank 0).
#ifndef RINGLEADER_CHECKPOINT_CHECKPOINT_SERIES_H_
#define RINGLEADER_CHECKPOINT_CHECKPOINT_SERIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"

namespace ringleader {

// "step-000000000040.ckpt".
std::string PeriodicCheckpointName(uint64_t step);

// The periodic checkpoints in `dir`, oldest first, as (step, path, name). A missing directory
// has none. Files whose names do not parse as step-<N>.ckpt are ignored (temp files included).
// Errors: FAILED_PRECONDITION when `dir` is a symbolic link (DirectoryHandle::Open);
// errno-derived codes when the directory exists but cannot be read.
struct PeriodicCheckpoint {
  uint64_t step;
  std::string path;  // <dir>/<name>
  std::string name;  // step-<N>.ckpt
};
absl::StatusOr<std::vector<PeriodicCheckpoint>> ListPeriodicCheckpoints(const std::string& dir);
absl::StatusOr<std::vector<PeriodicCheckpoint>> ListPeriodicCheckpoints(
    const DirectoryHandle& dir);

// Writes `data` as <dir>/step-<data.step>.ckpt (creating `dir` and its missing parents), then
// deletes the oldest periodic checkpoints of the same spec fingerprint so that `keep_last`
// (>= 1) of them remain (files with another fingerprint, or an unreadable header, are left
// alone: another job's data is never deleted); the shard files of a deleted manifest, and shard
// files of steps older than the oldest kept checkpoint (written before a crash, never
// committed), go too. Returns the path written. Errors:
// DirectoryHandle::Open's (FAILED_PRECONDITION when `dir` is a symbolic link), WriteCheckpoint's;
// a failed deletion is not an error (the file is left; the next write tries again).
absl::StatusOr<std::string> WritePeriodicCheckpoint(const std::string& dir,
                                                    const CheckpointData& data,
                                                    uint32_t keep_last);
absl::StatusOr<std::string> WritePeriodicCheckpoint(const DirectoryHandle& dir,
                                                    const CheckpointData& data,
                                                    uint32_t keep_last);

// Where a restarted attempt resumes.
struct ResumePoint {
  std::string path;     // the checkpoint chosen
  CheckpointData data;  // its contents, verified
};
struct ResumeSearch {
  std::optional<ResumePoint> found;  // none: start from step 0
  // One line per newer checkpoint that could not be used: "<path>: <why>".
  std::vector<std::string> skipped;
};

// The newest periodic checkpoint in `dir` that reads back whole (CRC) and was written by a
// job with `fingerprint` (another fingerprint: another configuration, skipped); a sharded
// checkpoint's manifest only if every shard it names is there with its recorded size and
// checksum (VerifyShards; else skipped as "<manifest path>: shard <path> ..."). A missing
// directory, or none usable, finds nothing. Errors: ListPeriodicCheckpoints'.
absl::StatusOr<ResumeSearch> FindResumePoint(const std::string& dir,
                                             const std::string& fingerprint);
absl::StatusOr<ResumeSearch> FindResumePoint(const DirectoryHandle& dir,
                                             const std::string& fingerprint);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_CHECKPOINT_SERIES_H_
