#include "worker/checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status ErrnoError(int err, const std::string& kind, const std::string& path,
                        const std::string& what) {
  return absl::ErrnoToStatus(err, absl::StrCat(kind, " ", path, ": ", what));
}

// mkdir -p of the directory part of `path`.
absl::Status MakeParentDirectories(const std::string& kind, const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return absl::OkStatus();
  const std::string dir = path.substr(0, slash);
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, kind, path, absl::StrCat("cannot create directory ", prefix));
    }
  }
  return absl::OkStatus();
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

// fsync of the directory that holds `path`, so the rename itself is durable.
absl::Status SyncParentDirectory(const std::string& kind, const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, kind, path, absl::StrCat("cannot open directory ", dir));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(err, kind, path, absl::StrCat("fsync of directory ", dir));
  return absl::OkStatus();
}

absl::Status WriteTempFile(const std::string& kind, const std::string& tmp,
                           const std::string& bytes) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, kind, tmp, "cannot create");
  absl::Status status = WriteAll(fd, bytes, kind, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError(errno, kind, tmp, "fsync failed");
  if (::close(fd) != 0 && status.ok()) status = ErrnoError(errno, kind, tmp, "close failed");
  return status;
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

}  // namespace

absl::Status WriteFileAtomically(const std::string& kind, const std::string& path,
                                 const std::string& bytes) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, " path is empty"));
  RETURN_IF_ERROR(MakeParentDirectories(kind, path));
  const std::string tmp = path + ".tmp";
  absl::Status status = WriteTempFile(kind, tmp, bytes);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, kind, path, absl::StrCat("rename from ", tmp));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // best effort; the old file is untouched
    return status;
  }
  return SyncParentDirectory(kind, path);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& kind, const std::string& path) {
  return ReadUpTo(kind, path, std::string().max_size());
}

absl::StatusOr<std::string> ReadFilePrefix(const std::string& kind, const std::string& path,
                                           size_t max_bytes) {
  return ReadUpTo(kind, path, max_bytes);
}

}  // namespace ringleader
