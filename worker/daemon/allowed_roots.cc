#include "worker/daemon/allowed_roots.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringleader {
namespace {

// As Linux's path resolution (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

std::vector<std::string> Components(absl::string_view path) {
  return absl::StrSplit(path, '/', absl::SkipEmpty());
}

std::string JoinAbsolute(const std::vector<std::string>& components) {
  return absl::StrCat("/", absl::StrJoin(components, "/"));
}

// `path` with repeated and trailing slashes and "." components removed (".." kept): how the
// message quotes a path whose resolution changed nothing else.
std::string Tidy(absl::string_view path) {
  std::vector<std::string> kept;
  for (std::string& name : Components(path)) {
    if (name != ".") kept.push_back(std::move(name));
  }
  return JoinAbsolute(kept);
}

bool Contains(const std::string& root, const std::string& path) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

}  // namespace

absl::StatusOr<std::string> ResolvePath(absl::string_view path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not an absolute path"));
  }
  std::deque<std::string> pending;
  for (std::string& name : Components(path)) pending.push_back(std::move(name));
  // resolved[0, existing) exists and holds no symbolic link (it is canonical); the components
  // after it do not exist (yet) and are kept as written.
  std::vector<std::string> resolved;
  size_t existing = 0;
  int links = 0;
  while (!pending.empty()) {
    std::string name = std::move(pending.front());
    pending.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      // The parent of a canonical directory is canonical; "/.." stays "/".
      if (!resolved.empty()) {
        if (existing == resolved.size()) --existing;
        resolved.pop_back();
      }
      continue;
    }
    resolved.push_back(std::move(name));
    if (existing + 1 != resolved.size()) continue;  // its parent does not exist
    const std::string current = JoinAbsolute(resolved);
    struct stat info;
    if (lstat(current.c_str(), &info) != 0) {
      const int error = errno;
      if (error == ENOENT || error == ENOTDIR) continue;  // not there (yet)
      return absl::ErrnoToStatus(error, absl::StrCat("lstat ", current));
    }
    if (!S_ISLNK(info.st_mode)) {
      ++existing;
      continue;
    }
    if (++links > kMaxSymlinks) {
      return absl::FailedPreconditionError(
          absl::StrCat("more than ", kMaxSymlinks, " symbolic links (a loop?) at ", current));
    }
    std::string target(static_cast<size_t>(info.st_size > 0 ? info.st_size : 255) + 1, '\0');
    ssize_t length = 0;
    while ((length = readlink(current.c_str(), target.data(), target.size())) >=
           static_cast<ssize_t>(target.size())) {
      target.resize(target.size() * 2);  // the link grew since lstat
    }
    if (length < 0) return absl::ErrnoToStatus(errno, absl::StrCat("readlink ", current));
    target.resize(static_cast<size_t>(length));
    // The link is replaced by its target: from "/" when absolute, else from the link's
    // directory; what followed the link comes after the target.
    resolved.pop_back();
    if (!target.empty() && target.front() == '/') {
      resolved.clear();
      existing = 0;
    }
    std::vector<std::string> target_components = Components(target);
    pending.insert(pending.begin(), target_components.begin(), target_components.end());
  }
  return JoinAbsolute(resolved);
}

absl::StatusOr<AllowedRoots> AllowedRoots::Create(const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (root.empty() || root.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "allowed root '", root, "' is not an absolute path (e.g. /var/lib/ringleader)"));
    }
  }
  return AllowedRoots(roots);
}

std::string AllowedRoots::Describe() const { return absl::StrJoin(roots_, ", "); }

absl::Status AllowedRoots::Check(absl::string_view field, absl::string_view path) const {
  if (roots_.empty()) return absl::OkStatus();
  const std::string fix =
      absl::StrCat("set ", field,
                   " under one of them, or add a root with ringleader-worker --allowed_roots");
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", path, "' is relative: give an absolute path under the "
                     "worker's allowed roots (", Describe(), ")"));
  }
  absl::StatusOr<std::string> resolved = ResolvePath(path);
  if (!resolved.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": ", path, " cannot be resolved (", resolved.status().message(),
                     "), so it is not known to lie in the worker's allowed roots (", Describe(),
                     "): ", fix));
  }
  for (const std::string& root : roots_) {
    absl::StatusOr<std::string> resolved_root = ResolvePath(root);
    if (resolved_root.ok() && Contains(*resolved_root, *resolved)) return absl::OkStatus();
  }
  const std::string what = Tidy(path) == *resolved
                               ? std::string(path)
                               : absl::StrCat(path, " resolves to ", *resolved, ", which");
  return absl::PermissionDeniedError(absl::StrCat(
      field, ": ", what, " is outside the worker's allowed roots (", Describe(), "): ", fix));
}

}  // namespace ringleader
