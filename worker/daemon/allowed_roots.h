// Path confinement of the worker (ringleader-worker --allowed_roots): the directories a job's
// paths must lie in. Pure file-system logic (no daemon, no proto), so it is tested on its own.
//
// A path is judged by where it really leads: every component that exists is resolved as
// realpath(3) does (symbolic links followed, at any depth, relative or absolute), and the rest,
// which does not exist yet (a checkpoint directory rank 0 creates), is appended as written, with
// "." dropped and ".." taking the previous component away — what the kernel does once the
// missing directories are created. A symbolic link inside a root that leads out of it, a ".."
// that climbs out, and a dangling link whose target lies outside are all outside.
//
// The roots are resolved the same way at every check (a root may be a symbolic link, or be
// mounted after the worker started). A path is inside when its resolution equals a root's or
// continues it after a '/' (so /srv/data-old is not inside /srv/data); the root "/" holds every
// path.
//
// Only a check: the caller uses the path afterwards, so a link swapped in between (by a process
// that may write inside the root) is not caught here.
//
// Thread-safety: AllowedRoots is immutable; Check may be called from any thread.
#ifndef RINGLEADER_WORKER_DAEMON_ALLOWED_ROOTS_H_
#define RINGLEADER_WORKER_DAEMON_ALLOWED_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringleader {

// Where the absolute `path` leads (see the file comment): an absolute path without ".", ".." or
// repeated or trailing slashes. Errors: INVALID_ARGUMENT for a path that is empty or relative;
// FAILED_PRECONDITION after more than 40 symbolic links (a loop); the errno-derived code of an
// lstat/readlink that fails otherwise than "does not exist" (e.g. PERMISSION_DENIED).
absl::StatusOr<std::string> ResolvePath(absl::string_view path);

class AllowedRoots {
 public:
  // No roots: no confinement (Check accepts every path).
  AllowedRoots() = default;

  // `roots` as the operator wrote them (absolute; they need not exist yet). Errors:
  // INVALID_ARGUMENT naming a root that is empty or relative.
  static absl::StatusOr<AllowedRoots> Create(const std::vector<std::string>& roots);

  // Whether any root is set (otherwise nothing is confined).
  bool confining() const { return !roots_.empty(); }
  const std::vector<std::string>& roots() const { return roots_; }
  // "/var/lib/ringleader, /srv/data": the roots as given, for messages.
  std::string Describe() const;

  // OK when `path` lies in a root (always, when no root is set). `field` names the job spec
  // field in the message (e.g. "checkpoint_dir"). Errors:
  //   PERMISSION_DENIED "checkpoint_dir: /etc is outside the worker's allowed roots (R1, R2):
  //     set checkpoint_dir under one of them, or add a root with ringleader-worker
  //     --allowed_roots" — with "/x/link resolves to /etc, which is outside ..." when resolving
  //     changed more than the spelling;
  //   INVALID_ARGUMENT "<field>: '<path>' is relative: give an absolute path under ...";
  //   PERMISSION_DENIED "<field>: <path> cannot be resolved (<why>) ..." when ResolvePath fails.
  absl::Status Check(absl::string_view field, absl::string_view path) const;

 private:
  explicit AllowedRoots(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  std::vector<std::string> roots_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_ALLOWED_ROOTS_H_
