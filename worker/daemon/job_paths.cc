#include "worker/daemon/job_paths.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "common/job_spec.h"
#include "common/status_macros.h"
#include "worker/rank/resume.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

absl::Status CheckCheckpointDir(const v1::Assignment& assignment, const v1::JobSpec& spec,
                                const AllowedRoots& roots) {
  if (spec.checkpoint_dir().empty()) return absl::OkStatus();
  constexpr char kField[] = "checkpoint_dir";
  RETURN_IF_ERROR(roots.Check(kField, spec.checkpoint_dir()));
  // Where the trainer writes (the job id made a safe file name) and where a command job's
  // RINGLEADER_CHECKPOINT_DIR points (the id as is): the same for the coordinator's ids.
  const std::string trainer_dir = JobCheckpointDir(spec, assignment.job_id());
  const std::string command_dir =
      (fs::path(spec.checkpoint_dir()) / assignment.job_id()).string();
  for (const std::string& dir : {trainer_dir, command_dir}) {
    RETURN_IF_ERROR(roots.Check(kField, dir));
    std::error_code error;
    fs::directory_iterator entries(dir, error);  // an error: nothing there yet to check
    for (; !error && entries != fs::directory_iterator(); entries.increment(error)) {
      RETURN_IF_ERROR(roots.Check(kField, entries->path().string()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobPaths(const v1::Assignment& assignment, const AllowedRoots& roots) {
  if (!roots.confining()) return absl::OkStatus();
  // What the rank will use: the coordinator fills the defaults in already; filling them again
  // changes nothing then, and covers an assignment that left them out.
  v1::JobSpec spec = assignment.spec();
  ApplyJobSpecDefaults(&spec);
  if (spec.command_size() > 0) {
    if (!spec.workdir().empty()) RETURN_IF_ERROR(roots.Check("workdir", spec.workdir()));
    return CheckCheckpointDir(assignment, spec, roots);
  }
  RETURN_IF_ERROR(CheckCheckpointDir(assignment, spec, roots));
  if (!spec.data().path().empty()) RETURN_IF_ERROR(roots.Check("data.path", spec.data().path()));
  if (!spec.model().init_from().empty()) {
    RETURN_IF_ERROR(roots.Check("model.init_from", spec.model().init_from()));
  }
  return absl::OkStatus();
}

}  // namespace ringleader
