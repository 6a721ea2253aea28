// The resume decision of a restarted attempt: rank 0 chooses, the others follow.
#include "worker/rank/resume.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_series.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

// Keeps the directory name safe whatever the job id holds.
std::string SafeFileName(std::string name) {
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "job");
  return name;
}

}  // namespace

std::string JobCheckpointDir(const v1::JobSpec& spec, const std::string& job_id) {
  if (spec.checkpoint_dir().empty()) return "";
  return absl::StrCat(spec.checkpoint_dir(), "/", SafeFileName(job_id));
}

absl::StatusOr<DirectoryHandle> OpenJobCheckpointDir(const v1::JobSpec& spec,
                                                     const std::string& job_id, bool create) {
  if (spec.checkpoint_dir().empty()) {
    return absl::FailedPreconditionError("the job spec has no checkpoint_dir");
  }
  ASSIGN_OR_RETURN(const DirectoryHandle root,
                   DirectoryHandle::Open("checkpoint", spec.checkpoint_dir(), create));
  return root.OpenSubdirectory(SafeFileName(job_id), create);
}

absl::StatusOr<ResumeDecision> DecideResume(const v1::Assignment& assignment,
                                            const v1::JobSpec& spec,
                                            const std::string& fingerprint, KeyValueStore* store,
                                            absl::Duration timeout) {
  ResumeDecision decision;
  const std::string dir = JobCheckpointDir(spec, assignment.job_id());
  if (assignment.generation() <= 1 || dir.empty()) return decision;

  if (assignment.rank() == 0) {
    ResumeSearch search;  // none when the directory does not exist (yet)
    absl::StatusOr<DirectoryHandle> opened =
        OpenJobCheckpointDir(spec, assignment.job_id(), /*create=*/false);
    if (opened.ok()) {
      ASSIGN_OR_RETURN(search, FindResumePoint(*opened, fingerprint));
    } else if (opened.status().code() != absl::StatusCode::kNotFound) {
      return opened.status();
    }
    decision.skipped = std::move(search.skipped);
    if (search.found.has_value()) {
      decision.path = search.found->path;
      decision.checkpoint = std::move(search.found->data);
    }
    RETURN_IF_ERROR(store->Set(kResumeKey, decision.path));
    return decision;
  }

  ASSIGN_OR_RETURN(decision.path, store->Get(kResumeKey, timeout));
  if (decision.path.empty()) return decision;
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(decision.path);
  if (read.status().code() == absl::StatusCode::kNotFound) {
    // The cluster's storage is set up wrong for this job: a restart fails again.
    return WithFailureKind(
        absl::FailedPreconditionError(absl::StrCat(
            "rank 0 resumes from ", decision.path, ", which is not readable on this rank's host: ",
            read.status().message(),
            " (checkpoint_dir must be storage every worker reads, e.g. a shared file system)")),
        v1::RankFailure::JOB_ERROR);
  }
  if (!read.ok()) return WithFailureKind(read.status(), v1::RankFailure::IO_ERROR);
  decision.checkpoint = *std::move(read);
  return decision;
}

}  // namespace ringleader
