// Whole-file reads and atomic whole-file writes, shared by the checkpoint and safetensors
// formats.
//
// Every error names the file as "<kind> <path>" (kind: "checkpoint", "safetensors file", ...),
// with codes from errno by Abseil's mapping (absl::ErrnoToStatus: PERMISSION_DENIED,
// RESOURCE_EXHAUSTED for a full disk, ...), except as noted per function.
//
// Thread-safety: free functions without shared state; concurrent writers of the same path must
// be serialised by the caller.
#ifndef RINGLEADER_WORKER_CHECKPOINT_FILE_IO_H_
#define RINGLEADER_WORKER_CHECKPOINT_FILE_IO_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringleader {

// Writes `bytes` to `path` atomically: missing parent directories are created, the bytes go to
// <path>.tmp, which is fsync'ed and renamed over <path>, then the directory is fsync'ed; a crash
// leaves either the old file or the new one, never a mix. On error the temporary file is
// removed (best effort) and the previous file at `path`, if any, is untouched.
// Errors: INVALID_ARGUMENT for an empty path; errno-derived codes for I/O failures.
absl::Status WriteFileAtomically(const std::string& kind, const std::string& path,
                                 const std::string& bytes);

// The whole content of `path`. Errors: NOT_FOUND "<kind> <path> does not exist"; errno-derived
// codes for other failures to open or read.
absl::StatusOr<std::string> ReadWholeFile(const std::string& kind, const std::string& path);

// The first `max_bytes` bytes of `path` (fewer if the file is shorter). Errors: as ReadWholeFile.
absl::StatusOr<std::string> ReadFilePrefix(const std::string& kind, const std::string& path,
                                           size_t max_bytes);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_CHECKPOINT_FILE_IO_H_
