// `ringleader export JOB -o FILE.safetensors`: the job's final weights (the checkpoint rank 0
// wrote at the end) as a safetensors file PyTorch can load (checkpoint/export.h). The
// checkpoint is read from the path the coordinator recorded, so the command runs where the
// job's checkpoint_dir is readable.
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/export.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "common/states.h"

namespace ringleader {

int RunExport(const std::string& job_id, const std::string& output_path, JobClient& client,
              const CommandEnvironment& env) {
  absl::StatusOr<v1::GetJobResponse> got = client.Get(job_id);
  if (!got.ok()) return ReportError(got.status(), absl::StrCat("cannot get job ", job_id), env);
  const v1::JobStatus& job = got->job();
  if (job.checkpoint_path().empty()) {
    *env.err << "error: job " << job_id << " has no final checkpoint (" << JobStateName(job.state())
             << "): only a job that SUCCEEDED with a checkpoint_dir has one\n";
    return kExitFailure;
  }
  absl::StatusOr<CheckpointData> checkpoint = ReadCheckpoint(job.checkpoint_path());
  if (!checkpoint.ok()) {
    *env.err << "error: " << checkpoint.status().message()
             << " (export runs where the job's checkpoint_dir is readable)\n";
    return kExitFailure;
  }
  if (absl::Status written = ExportSafetensors(*checkpoint, output_path); !written.ok()) {
    *env.err << "error: " << written.message() << "\n";
    return kExitFailure;
  }
  if (env.json) {
    return PrintJsonFields({{"job_id", job_id},
                            {"step", absl::StrCat(checkpoint->step)},
                            {"checkpoint", job.checkpoint_path()},
                            {"wrote", output_path}},
                           env);
  }
  *env.out << "wrote the weights of " << job_id << " (step " << checkpoint->step << ") from "
           << job.checkpoint_path() << " to " << output_path << "\n";
  return kExitOk;
}

}  // namespace ringleader
