// Whole-file reads and atomic whole-file writes, shared by the checkpoint and safetensors
// formats, and DirectoryHandle: a directory opened once, whose files are written, read, listed
// and removed relative to its descriptor, never through a symbolic link.
//
// Every error names the file as "<kind> <path>" (kind: "checkpoint", "safetensors file", ...),
// or its directory as "<kind> directory <path>", with the errno text and codes from errno by
// Abseil's mapping (absl::ErrnoToStatus: PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full
// disk, ...), except as noted per function.
//
// Symbolic links. The worker checks that a job's paths lie in its allowed roots
// (worker/daemon/allowed_roots.h), but a process that may write there could swap a symbolic link
// in between that check and a write. So the writes never go through one: the temporary file is
// created with O_CREAT | O_EXCL | O_NOFOLLOW relative to the directory's descriptor and renamed
// over the final name with renameat (a link planted at the final name is replaced, never written
// through); DirectoryHandle::Open refuses a directory whose last component is a link, and the
// descriptor keeps naming the directory it opened whatever is renamed or linked afterwards.
// Components above that directory are resolved as usual when it is opened (an allowed root may
// itself be a link). Readers of files in such a directory (ReadFileNoFollow, ReadFile) open with
// O_NOFOLLOW and refuse what is not a regular file (a FIFO would block the reader).
//
// Thread-safety: free functions without shared state; a DirectoryHandle may be used from any
// thread (its methods are const and use only its descriptor); concurrent writers of the same
// file must be serialised by the caller.
#ifndef RINGLEADER_CHECKPOINT_FILE_IO_H_
#define RINGLEADER_CHECKPOINT_FILE_IO_H_

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringleader {

// Whether a symbolic link as the last component of a directory path is followed.
enum class DirectoryLinks {
  kFollow,  // files a user names outside any confinement (the CLI's output files)
  kRefuse,  // files in a job's directories (checkpoints): FAILED_PRECONDITION
};

// An open directory (see "Symbolic links" above): move-only, closes its descriptor when
// destroyed. `kind` names its files in messages ("checkpoint /d/step-1.ckpt: ...").
class DirectoryHandle {
 public:
  // Opens the directory `path` (trailing slashes ignored: "d/" would follow a link "d") with
  // O_DIRECTORY | O_NOFOLLOW. With `create`, missing directories on the way are made first
  // (mode 0755, as mkdir -p). Messages name `path` as given.
  // Errors: INVALID_ARGUMENT (empty path); FAILED_PRECONDITION "<kind> directory <path> is a
  // symbolic link ..." (nothing is created or written through it) or "... is not a directory";
  // NOT_FOUND "<kind> directory <path> does not exist" (without `create`); errno-derived codes
  // for other failures to create or open it.
  static absl::StatusOr<DirectoryHandle> Open(const std::string& kind, const std::string& path,
                                              bool create);
  // As Open, but a symbolic link as the last component is followed (DirectoryLinks::kFollow).
  static absl::StatusOr<DirectoryHandle> OpenFollowingLinks(const std::string& kind,
                                                            const std::string& path, bool create);

  DirectoryHandle(DirectoryHandle&& other) noexcept;
  DirectoryHandle& operator=(DirectoryHandle&& other) noexcept;
  DirectoryHandle(const DirectoryHandle&) = delete;
  DirectoryHandle& operator=(const DirectoryHandle&) = delete;
  ~DirectoryHandle();

  // The subdirectory `name` (one component) of this directory, opened as Open does, relative to
  // this descriptor (made with mkdirat first when `create`). Errors: as Open, and
  // INVALID_ARGUMENT for a name that is empty, ".", ".." or holds a '/'.
  absl::StatusOr<DirectoryHandle> OpenSubdirectory(const std::string& name, bool create) const;

  // The directory's path as it was given (for messages and callers that report paths).
  const std::string& path() const { return path_; }
  // "<path>/<name>".
  std::string PathOf(const std::string& name) const;

  // Writes `bytes` as the file `name` atomically: a stale "<name>.tmp" (or a link of that name)
  // is unlinked, "<name>.tmp" is created with O_CREAT | O_EXCL | O_NOFOLLOW (mode 0644 before
  // the umask), written, fsync'ed, renamed over `name` (renameat: a symbolic link there is
  // replaced, its target never touched), and the directory is fsync'ed. A crash leaves either
  // the old file or the new one, never a mix; on error the temporary file is removed (best
  // effort) and the previous file, if any, is untouched.
  // Errors: INVALID_ARGUMENT (a bad name, see OpenSubdirectory); ALREADY_EXISTS when
  // "<name>.tmp" appears again between its unlink and its creation (another writer); errno-derived
  // codes for I/O failures (EISDIR when `name` is a directory, ...).
  absl::Status WriteFileAtomically(const std::string& name, const std::string& bytes) const;

  // The first `max_bytes` bytes of the file `name` (all of it by default), opened with
  // O_NOFOLLOW. Errors: NOT_FOUND "<kind> <path> does not exist"; FAILED_PRECONDITION "<kind>
  // <path> is a symbolic link ..." or "... is not a regular file"; INVALID_ARGUMENT (a bad name);
  // errno-derived codes for other failures to open or read.
  absl::StatusOr<std::string> ReadFile(const std::string& name,
                                       size_t max_bytes = std::numeric_limits<size_t>::max()) const;

  // The names of the directory's entries ("." and ".." left out), in no particular order.
  // Errors: errno-derived codes when it cannot be read.
  absl::StatusOr<std::vector<std::string>> ListNames() const;

  // Unlinks the entry `name` (a symbolic link itself, never its target). Errors: NOT_FOUND when
  // there is none; INVALID_ARGUMENT (a bad name); errno-derived codes otherwise (EISDIR for a
  // directory).
  absl::Status Remove(const std::string& name) const;

 private:
  DirectoryHandle(std::string kind, std::string path, int fd)
      : kind_(std::move(kind)), path_(std::move(path)), fd_(fd) {}
  static absl::StatusOr<DirectoryHandle> OpenAt(int parent_fd, const std::string& kind,
                                                const std::string& path, const std::string& to_open,
                                                bool create, DirectoryLinks links);

  std::string kind_;
  std::string path_;
  int fd_ = -1;
};

// Writes `bytes` to `path` atomically: missing parent directories are created, then the
// parent directory is opened once (following a symbolic link as its last component or not, as
// `links` says) and the file is written in it as DirectoryHandle::WriteFileAtomically does
// (<path>.tmp, fsync, renamed over <path>, directory fsync'ed; never through a symbolic link).
// Errors: INVALID_ARGUMENT for an empty path or one ending in '/'; DirectoryHandle::Open's for
// the parent directory; errno-derived codes for I/O failures.
absl::Status WriteFileAtomically(const std::string& kind, const std::string& path,
                                 const std::string& bytes,
                                 DirectoryLinks links = DirectoryLinks::kFollow);

// The whole content of `path` (symbolic links followed: model.init_from may name a link, e.g.
// a file of Hugging Face's cache). Errors: NOT_FOUND "<kind> <path> does not exist";
// errno-derived codes for other failures to open or read.
absl::StatusOr<std::string> ReadWholeFile(const std::string& kind, const std::string& path);

// The first `max_bytes` bytes of `path` (fewer if the file is shorter). Errors: as ReadWholeFile.
absl::StatusOr<std::string> ReadFilePrefix(const std::string& kind, const std::string& path,
                                           size_t max_bytes);

// As ReadFilePrefix, but `path` itself is opened with O_NOFOLLOW and must be a regular file
// (the directories above it are resolved as usual). Errors: as DirectoryHandle::ReadFile.
absl::StatusOr<std::string> ReadFileNoFollow(const std::string& kind, const std::string& path,
                                             size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_FILE_IO_H_
