// The resume decision of a restarted attempt: rank 0 chooses, the others follow.
#include "worker/rank/resume.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_series.h"
#include "common/file_names.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/rank/snapshots.h"

namespace ringleader {

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

namespace {

// The checkpoint rank r reads: the one rank 0 published (kResumeKey), "" for none.
absl::Status ReadPublishedCheckpoint(KeyValueStore* store, absl::Duration timeout,
                                     ResumeDecision* decision) {
  ASSIGN_OR_RETURN(decision->path, store->Get(kResumeKey, timeout));
  if (decision->path.empty()) return absl::OkStatus();
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(decision->path);
  if (read.status().code() == absl::StatusCode::kNotFound) {
    // The cluster's storage is set up wrong for this job: a restart fails again.
    return WithFailureKind(
        absl::FailedPreconditionError(absl::StrCat(
            "rank 0 resumes from ", decision->path,
            ", which is not readable on this rank's host: ", read.status().message(),
            " (checkpoint_dir must be storage every worker reads, e.g. a shared file system)")),
        v1::RankFailure::JOB_ERROR);
  }
  if (!read.ok()) return WithFailureKind(read.status(), v1::RankFailure::IO_ERROR);
  decision->checkpoint = *std::move(read);
  return absl::OkStatus();
}

struct SnapshotChoice {
  uint64_t step = 0;
  int source = -1;
  bool heal = false;
};

std::string Encode(const SnapshotChoice& c) {
  return absl::StrCat(c.step, " ", c.source, " ", c.heal ? 1 : 0);
}

absl::StatusOr<std::optional<SnapshotChoice>> Decode(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::vector<std::string> parts = absl::StrSplit(text, ' ');
  SnapshotChoice c;
  int heal = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &c.step) ||
      !absl::SimpleAtoi(parts[1], &c.source) || !absl::SimpleAtoi(parts[2], &heal)) {
    return absl::InternalError(absl::StrCat("rank 0's snapshot decision '", text,
                                            "' is not '<step> <source> <heal>'"));
  }
  c.heal = heal != 0;
  return c;
}

// Rank 0: the newest snapshot any rank holds, when it is at least `disk_step` (the checkpoint's).
absl::StatusOr<std::optional<SnapshotChoice>> ChooseSnapshot(KeyValueStore* store,
                                                             uint32_t world, uint64_t disk_step,
                                                             absl::Duration timeout) {
  std::vector<std::optional<uint64_t>> held(world);
  for (uint32_t r = 0; r < world; ++r) {
    ASSIGN_OR_RETURN(const std::string text,
                     store->Get(absl::StrCat(kSnapshotStepKey, r), timeout));
    uint64_t step = 0;
    if (!text.empty() && absl::SimpleAtoi(text, &step)) held[r] = step;
  }
  std::optional<SnapshotChoice> choice;
  for (uint32_t r = 0; r < world; ++r) {
    if (held[r].has_value() && *held[r] > 0 && *held[r] >= disk_step &&
        (!choice.has_value() || *held[r] > choice->step)) {
      choice = SnapshotChoice{*held[r], static_cast<int>(r), false};
    }
  }
  if (!choice.has_value()) return choice;
  for (uint32_t r = 0; r < world; ++r) {
    if (held[r] != choice->step) choice->heal = true;
  }
  return choice;
}

}  // namespace

absl::StatusOr<ResumeDecision> DecideResume(const v1::Assignment& assignment,
                                            const v1::JobSpec& spec,
                                            const std::string& fingerprint, KeyValueStore* store,
                                            absl::Duration timeout,
                                            const SnapshotTier* snapshots) {
  ResumeDecision decision;
  const std::string dir = JobCheckpointDir(spec, assignment.job_id());
  if (assignment.generation() <= 1 || (dir.empty() && snapshots == nullptr)) return decision;
  const uint32_t rank = assignment.rank();

  // Every rank: the newest snapshot it holds, published for rank 0.
  std::optional<LocalSnapshot> local;
  if (snapshots != nullptr) {
    if (!snapshots->dir.empty()) {
      absl::StatusOr<std::optional<LocalSnapshot>> found =
          FindLocalSnapshot(snapshots->dir, fingerprint, &decision.skipped);
      if (found.ok()) {
        local = *std::move(found);
      } else {  // an unreadable directory holds nothing usable
        decision.skipped.push_back(std::string(found.status().message()));
      }
    }
    RETURN_IF_ERROR(store->Set(absl::StrCat(kSnapshotStepKey, rank),
                               local.has_value() ? absl::StrCat(local->step) : ""));
  }

  std::optional<SnapshotChoice> choice;
  if (rank == 0) {
    ResumeSearch search;  // none when the directory does not exist (yet)
    if (!dir.empty()) {
      absl::StatusOr<DirectoryHandle> opened =
          OpenJobCheckpointDir(spec, assignment.job_id(), /*create=*/false);
      if (opened.ok()) {
        ASSIGN_OR_RETURN(search, FindResumePoint(*opened, fingerprint));
      } else if (opened.status().code() != absl::StatusCode::kNotFound) {
        return opened.status();
      }
    }
    decision.skipped.insert(decision.skipped.end(), search.skipped.begin(), search.skipped.end());
    const uint64_t disk_step = search.found.has_value() ? search.found->data.step : 0;
    if (snapshots != nullptr) {
      ASSIGN_OR_RETURN(choice,
                       ChooseSnapshot(store, assignment.world_size(), disk_step, timeout));
      RETURN_IF_ERROR(store->Set(kSnapshotResumeKey, choice.has_value() ? Encode(*choice) : ""));
    }
    if (!choice.has_value() && search.found.has_value()) {
      decision.path = search.found->path;
      decision.checkpoint = std::move(search.found->data);
    }
    RETURN_IF_ERROR(store->Set(kResumeKey, decision.path));
  } else {
    if (snapshots != nullptr) {
      ASSIGN_OR_RETURN(const std::string text, store->Get(kSnapshotResumeKey, timeout));
      ASSIGN_OR_RETURN(choice, Decode(text));
    }
    if (!choice.has_value()) {
      RETURN_IF_ERROR(ReadPublishedCheckpoint(store, timeout, &decision));
      return decision;
    }
  }
  if (!choice.has_value()) return decision;

  decision.from_snapshot = true;
  decision.snapshot_step = choice->step;
  decision.heal = choice->heal;
  decision.heal_source = choice->source;
  if (local.has_value() && local->step == choice->step) {
    decision.path = local->path;
    decision.checkpoint = std::move(local->data);
    if (choice->heal && choice->source == static_cast<int>(rank)) {
      decision.snapshot_bytes = std::move(local->bytes);
    }
  } else {
    decision.path = absl::StrCat("the snapshot of step ", choice->step, " in rank ",
                                 choice->source, "'s memory");
  }
  return decision;
}

}  // namespace ringleader
