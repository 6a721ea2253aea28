// Which paths of a job spec the worker confines to its allowed roots (allowed_roots.h), checked
// by the daemon before it starts a rank: a refused spec fails the job, not restartable (every
// worker of a cluster is set up alike, so a restart would be refused the same way).
//
//   built-in trainer  checkpoint_dir, data.path (after the spec's defaults: fashion-mnist reads
//                     /usr/share/datasets/fashion-mnist unless the spec names another),
//                     model.init_from
//   command job       workdir, checkpoint_dir (model and data do not apply to it)
//
// checkpoint_dir: the directory itself, the job's own directory below it (where rank 0 writes,
// see JobCheckpointDir in worker/rank/resume.h) and every entry already in that one (a file
// replaced by a symbolic link leading out would otherwise be written through or read back).
#ifndef RINGLEADER_WORKER_DAEMON_JOB_PATHS_H_
#define RINGLEADER_WORKER_DAEMON_JOB_PATHS_H_

#include "absl/status/status.h"
#include "proto/ringleader.pb.h"
#include "worker/daemon/allowed_roots.h"

namespace ringleader {

// OK when every path above lies in `roots` (always when `roots` confines nothing); otherwise
// the first refusal of AllowedRoots::Check, naming the field, the path and the roots.
absl::Status CheckJobPaths(const v1::Assignment& assignment, const AllowedRoots& roots);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_JOB_PATHS_H_
