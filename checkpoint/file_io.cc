#include "checkpoint/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status ErrnoError(int err, const std::string& kind, const std::string& path,
                        const std::string& what) {
  return absl::ErrnoToStatus(err, absl::StrCat(kind, " ", path, ": ", what));
}

// `path` without trailing slashes ("/" stays "/"): a trailing slash makes the kernel follow a
// symbolic link even under O_NOFOLLOW.
std::string WithoutTrailingSlashes(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;
  return path.substr(0, end);
}

// mkdir -p of `dir`; errors name `path` (what the caller is about).
absl::Status MakeDirectories(const std::string& kind, const std::string& path,
                             const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, kind, path, absl::StrCat("cannot create directory ", prefix));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckName(const std::string& kind, const std::string& dir, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " directory ", dir, ": '", name,
                                                   "' is not a file name (one path component)"));
  }
  return absl::OkStatus();
}

bool IsSymbolicLink(int dir_fd, const std::string& name) {
  struct stat info;
  return ::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(info.st_mode);
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& kind,
                      const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, kind, path, "write failed");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads from `fd` until end of file or `max_bytes`; closes it.
absl::StatusOr<std::string> ReadAndClose(int fd, const std::string& kind, const std::string& path,
                                         size_t max_bytes) {
  std::string bytes;
  char chunk[1 << 16];
  while (bytes.size() < max_bytes) {
    const ssize_t n = ::read(fd, chunk, std::min(sizeof(chunk), max_bytes - bytes.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoError(err, kind, path, "read failed");
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

// Opens `name` relative to `dir_fd` (AT_FDCWD: a path) for reading: never through a symbolic
// link at `name` itself, and only a regular file (O_NONBLOCK: a FIFO planted there must not
// block the open; it is refused right after). `path` is what messages call it.
absl::StatusOr<int> OpenRegularNoFollow(int dir_fd, const std::string& name,
                                        const std::string& kind, const std::string& path) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat(kind, " ", path, " does not exist"));
    }
    if (err == ELOOP && IsSymbolicLink(dir_fd, name)) {
      return absl::FailedPreconditionError(
          absl::StrCat(kind, " ", path,
                       " is a symbolic link: not followed (a link swapped in could lead out "
                       "of the worker's allowed roots); name the file itself"));
    }
    return ErrnoError(err, kind, path, "cannot open");
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, kind, path, "cannot stat");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(kind, " ", path, " is not a regular file"));
  }
  // Reads of a regular file never block; the flag only kept the open from waiting.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<int> OpenForReading(const std::string& kind, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(kind, " ", path, " does not exist"));
  return ErrnoError(errno, kind, path, "cannot open");
}

// Reads from `path` until end of file or `max_bytes`.
absl::StatusOr<std::string> ReadUpTo(const std::string& kind, const std::string& path,
                                     size_t max_bytes) {
  ASSIGN_OR_RETURN(const int fd, OpenForReading(kind, path));
  return ReadAndClose(fd, kind, path, max_bytes);
}

}  // namespace

// ---- DirectoryHandle ------------------------------------------------------------------------

absl::StatusOr<DirectoryHandle> DirectoryHandle::Open(const std::string& kind,
                                                      const std::string& path, bool create) {
  return OpenAt(AT_FDCWD, kind, path, path, create, DirectoryLinks::kRefuse);
}

absl::StatusOr<DirectoryHandle> DirectoryHandle::OpenFollowingLinks(const std::string& kind,
                                                                    const std::string& path,
                                                                    bool create) {
  return OpenAt(AT_FDCWD, kind, path, path, create, DirectoryLinks::kFollow);
}

absl::StatusOr<DirectoryHandle> DirectoryHandle::OpenAt(int parent_fd, const std::string& kind,
                                                        const std::string& path,
                                                        const std::string& to_open, bool create,
                                                        DirectoryLinks links) {
  if (to_open.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " directory path is empty"));
  }
  const std::string name = WithoutTrailingSlashes(to_open);
  const std::string what = absl::StrCat(kind, " directory");
  if (create) {
    if (parent_fd == AT_FDCWD) {
      RETURN_IF_ERROR(MakeDirectories(what, path, name));
    } else if (::mkdirat(parent_fd, name.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, what, path, "cannot create it");
    }
  }
  const int flags =
      O_RDONLY | O_DIRECTORY | O_CLOEXEC | (links == DirectoryLinks::kRefuse ? O_NOFOLLOW : 0);
  const int fd = ::openat(parent_fd, name.c_str(), flags);
  if (fd >= 0) return DirectoryHandle(kind, path, fd);
  const int err = errno;
  if (err == ENOENT) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, " does not exist"));
  }
  // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR (ELOOP on older kernels).
  if ((err == ENOTDIR || err == ELOOP) && links == DirectoryLinks::kRefuse &&
      IsSymbolicLink(parent_fd, name)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", path,
        " is a symbolic link: not followed (a link swapped in after the worker checked its "
        "allowed roots could redirect the writes); name the directory it points to"));
  }
  if (err == ENOTDIR) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", path, " is not a directory"));
  }
  return ErrnoError(err, what, path, "cannot open");
}

DirectoryHandle::DirectoryHandle(DirectoryHandle&& other) noexcept
    : kind_(std::move(other.kind_)), path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

DirectoryHandle& DirectoryHandle::operator=(DirectoryHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    kind_ = std::move(other.kind_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DirectoryHandle::~DirectoryHandle() {
  if (fd_ >= 0) ::close(fd_);
}

std::string DirectoryHandle::PathOf(const std::string& name) const {
  if (path_ == ".") return name;
  if (!path_.empty() && path_.back() == '/') return absl::StrCat(path_, name);
  return absl::StrCat(path_, "/", name);
}

absl::StatusOr<DirectoryHandle> DirectoryHandle::OpenSubdirectory(const std::string& name,
                                                                  bool create) const {
  RETURN_IF_ERROR(CheckName(kind_, path_, name));
  return OpenAt(fd_, kind_, PathOf(name), name, create, DirectoryLinks::kRefuse);
}

absl::Status DirectoryHandle::WriteFileAtomically(const std::string& name,
                                                  const std::string& bytes) const {
  RETURN_IF_ERROR(CheckName(kind_, path_, name));
  const std::string path = PathOf(name);
  const std::string tmp_name = name + ".tmp";
  const std::string tmp = PathOf(tmp_name);
  // A temporary file left by a crash, or a link planted under its name: the entry goes, never
  // what a link points to.
  if (::unlinkat(fd_, tmp_name.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoError(errno, kind_, tmp, "cannot remove the stale temporary file");
  }
  const int fd =
      ::openat(fd_, tmp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(
          kind_, " ", tmp, " was created by someone else while this write was starting"));
    }
    return ErrnoError(err, kind_, tmp, "cannot create");
  }
  absl::Status status = WriteAll(fd, bytes, kind_, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError(errno, kind_, tmp, "fsync failed");
  if (::close(fd) != 0 && status.ok()) status = ErrnoError(errno, kind_, tmp, "close failed");
  if (status.ok() && ::renameat(fd_, tmp_name.c_str(), fd_, name.c_str()) != 0) {
    status = ErrnoError(errno, kind_, path, absl::StrCat("rename from ", tmp));
  }
  if (!status.ok()) {
    ::unlinkat(fd_, tmp_name.c_str(), 0);  // best effort; the old file is untouched
    return status;
  }
  // The rename itself is durable once the directory is.
  if (::fsync(fd_) != 0) {
    return ErrnoError(errno, kind_, path, absl::StrCat("fsync of directory ", path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DirectoryHandle::ReadFile(const std::string& name,
                                                      size_t max_bytes) const {
  RETURN_IF_ERROR(CheckName(kind_, path_, name));
  const std::string path = PathOf(name);
  ASSIGN_OR_RETURN(const int fd, OpenRegularNoFollow(fd_, name, kind_, path));
  return ReadAndClose(fd, kind_, path, max_bytes);
}

absl::StatusOr<std::vector<std::string>> DirectoryHandle::ListNames() const {
  // A descriptor of its own (its own read position), of the same directory: "." is never a
  // link.
  const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat(kind_, " directory"), path_, "cannot list");
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::fdopendir(fd), ::closedir);
  if (handle == nullptr) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat(kind_, " directory"), path_, "cannot list");
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(handle.get())) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  if (errno != 0) {
    return ErrnoError(errno, absl::StrCat(kind_, " directory"), path_, "cannot list");
  }
  return names;
}

absl::Status DirectoryHandle::Remove(const std::string& name) const {
  RETURN_IF_ERROR(CheckName(kind_, path_, name));
  if (::unlinkat(fd_, name.c_str(), 0) == 0) return absl::OkStatus();
  if (errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat(kind_, " ", PathOf(name), " does not exist"));
  }
  return ErrnoError(errno, kind_, PathOf(name), "cannot remove");
}

// ---- Paths ----------------------------------------------------------------------------------

absl::Status WriteFileAtomically(const std::string& kind, const std::string& path,
                                 const std::string& bytes, DirectoryLinks links) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, " path is empty"));
  const size_t slash = path.rfind('/');
  if (slash == path.size() - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, " ", path, ": names a directory, not a file"));
  }
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (slash != std::string::npos && slash != 0) RETURN_IF_ERROR(MakeDirectories(kind, path, dir));
  absl::StatusOr<DirectoryHandle> directory =
      links == DirectoryLinks::kRefuse ? DirectoryHandle::Open(kind, dir, false)
                                       : DirectoryHandle::OpenFollowingLinks(kind, dir, false);
  if (!directory.ok()) return directory.status();
  return directory->WriteFileAtomically(name, bytes);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& kind, const std::string& path) {
  return ReadUpTo(kind, path, std::string().max_size());
}

absl::StatusOr<std::string> ReadFilePrefix(const std::string& kind, const std::string& path,
                                           size_t max_bytes) {
  return ReadUpTo(kind, path, max_bytes);
}

absl::StatusOr<std::string> ReadFileNoFollow(const std::string& kind, const std::string& path,
                                             size_t max_bytes) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, " path is empty"));
  ASSIGN_OR_RETURN(const int fd, OpenRegularNoFollow(AT_FDCWD, path, kind, path));
  return ReadAndClose(fd, kind, path, max_bytes);
}

}  // namespace ringleader
