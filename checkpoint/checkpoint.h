// Training checkpoints: one file holding the step, the epoch, the job-spec fingerprint, free-form
// string attributes and named float tensors (model parameters, optimizer momentum buffers,
// float buffers).
//
// File format (version 1; all integers little-endian):
//   "RLCKPT01"                       8-byte magic
//   u32 version                      = 1
//   u64 step, u64 epoch
//   str spec_fingerprint             (str = u32 length + bytes)
//   u32 attribute count, then per attribute: str key, str value
//   u32 tensor count, then per tensor:
//     str name, u32 rank, rank × u64 dims, u64 element count (= product of dims),
//     count × f32 data (IEEE 754, little-endian)
//   u32 CRC-32 (zlib crc32) of every byte before it
//
// Writes are atomic: the file is written to <path>.tmp, fsync'ed, renamed over <path>, and the
// directory is fsync'ed, so a crash leaves either the old or the new checkpoint, never a mix.
// Checkpoints are never written or read through a symbolic link (file_io.h): the directory is
// opened once with O_NOFOLLOW (a directory that is a link is refused), the temporary file is
// created relative to it with O_EXCL | O_NOFOLLOW and renamed over the final name (a link
// there is replaced, its target untouched), and readers open the file with O_NOFOLLOW.
// Thread-safety: free functions without shared state; concurrent writers of the same path must
// be serialised by the caller.
#ifndef RINGLEADER_CHECKPOINT_CHECKPOINT_H_
#define RINGLEADER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/file_io.h"

namespace ringleader {

inline constexpr uint32_t kCheckpointVersion = 1;
// The first 8 bytes of every checkpoint file.
inline constexpr char kCheckpointMagic[] = "RLCKPT01";

struct CheckpointTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> data;  // product of shape elements
};

struct CheckpointData {
  uint64_t step = 0;   // optimizer steps completed
  uint64_t epoch = 0;  // epoch the next step belongs to
  std::string spec_fingerprint;  // JobSpecFingerprint of the job that wrote it
  std::map<std::string, std::string> attributes;  // anything else worth keeping
  std::vector<CheckpointTensor> tensors;  // unique names, written and read in this order

  // The tensor called `name`, or null.
  const CheckpointTensor* FindTensor(const std::string& name) const;
};

// The name under which a parameter's momentum buffer is stored in a checkpoint
// ("<parameter>.momentum_buffer").
std::string MomentumBufferName(const std::string& parameter_name);

// True for the names MomentumBufferName gives: optimizer state, not part of the model.
bool IsMomentumBufferName(const std::string& name);

// Writes `data` to `path` atomically, creating missing parent directories.
// Errors (naming the path): INVALID_ARGUMENT for duplicate tensor names or a tensor whose data
// size is not the product of its shape; FAILED_PRECONDITION "checkpoint directory <dir> is a
// symbolic link ..." when the directory holding `path` is one; errno-derived codes for I/O
// failures (PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full disk, EISDIR, ...). On error the
// previous checkpoint at `path`, if any, is untouched.
absl::Status WriteCheckpoint(const std::string& path, const CheckpointData& data);
// The same, as the file `name` of the opened directory `dir` (a job's checkpoint directory,
// opened once). Errors: as above; INVALID_ARGUMENT for a name that is not one path component.
absl::Status WriteCheckpoint(const DirectoryHandle& dir, const std::string& name,
                             const CheckpointData& data);

// Reads and verifies a checkpoint. Errors (naming the path): NOT_FOUND if missing;
// FAILED_PRECONDITION "checkpoint <path> is a symbolic link ..." (not followed) or "... is not
// a regular file"; INVALID_ARGUMENT if it is not a checkpoint (bad magic); FAILED_PRECONDITION
// for a version this build cannot read; DATA_LOSS "checkpoint <path> is corrupt: checksum
// mismatch" or "...: <what> is truncated / inconsistent" for damaged files; errno-derived codes
// for other I/O failures.
absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& path);
// The same, for the file `name` of the opened directory `dir`.
absl::StatusOr<CheckpointData> ReadCheckpoint(const DirectoryHandle& dir, const std::string& name);
// Decodes and verifies `bytes`, the content of a checkpoint file read from `path` (named in the
// messages): for callers that check the bytes themselves first (a shard's size and checksum
// against its manifest) and decode the very bytes they checked. Errors: ReadCheckpoint's for
// the content (INVALID_ARGUMENT, FAILED_PRECONDITION for the version, DATA_LOSS).
absl::StatusOr<CheckpointData> DecodeCheckpoint(const std::string& path, const std::string& bytes);

// The spec fingerprint in the header of the checkpoint at `path`, read without the rest of the
// file (no CRC check: for telling whose file it is, not for trusting its contents).
// Errors: NOT_FOUND (no file), FAILED_PRECONDITION (a symbolic link, not followed; not a
// regular file), INVALID_ARGUMENT (not a ringleader checkpoint), DATA_LOSS (shorter than its
// header), errno-derived codes for other failures to read it.
absl::StatusOr<std::string> ReadCheckpointFingerprint(const std::string& path);
// The same, for the file `name` of the opened directory `dir`.
absl::StatusOr<std::string> ReadCheckpointFingerprint(const DirectoryHandle& dir,
                                                      const std::string& name);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_CHECKPOINT_H_
