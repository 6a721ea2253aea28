// Periodic checkpoints of a job: naming, rotation and the choice of a resume point.
#include "checkpoint/checkpoint_series.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr char kKind[] = "checkpoint";
constexpr char kPrefix[] = "step-";
constexpr char kSuffix[] = ".ckpt";

// The step of a periodic checkpoint's file name, or nullopt for any other name.
std::optional<uint64_t> StepOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) {
    return std::nullopt;
  }
  if (name.empty() || name.find_first_not_of("0123456789") != absl::string_view::npos) {
    return std::nullopt;
  }
  uint64_t step = 0;
  if (!absl::SimpleAtoi(name, &step)) return std::nullopt;
  return step;
}

}  // namespace

std::string PeriodicCheckpointName(uint64_t step) {
  return absl::StrFormat("%s%012d%s", kPrefix, step, kSuffix);
}

absl::StatusOr<std::vector<PeriodicCheckpoint>> ListPeriodicCheckpoints(
    const DirectoryHandle& dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, dir.ListNames());
  std::vector<PeriodicCheckpoint> found;
  for (const std::string& name : names) {
    const std::optional<uint64_t> step = StepOfName(name);
    if (step.has_value()) found.push_back({*step, dir.PathOf(name), name});
  }
  std::sort(found.begin(), found.end(),
            [](const PeriodicCheckpoint& a, const PeriodicCheckpoint& b) { return a.step < b.step; });
  return found;
}

absl::StatusOr<std::vector<PeriodicCheckpoint>> ListPeriodicCheckpoints(const std::string& dir) {
  absl::StatusOr<DirectoryHandle> handle = DirectoryHandle::Open(kKind, dir, /*create=*/false);
  if (handle.status().code() == absl::StatusCode::kNotFound) {
    return std::vector<PeriodicCheckpoint>{};
  }
  if (!handle.ok()) return handle.status();
  return ListPeriodicCheckpoints(*handle);
}

absl::StatusOr<std::string> WritePeriodicCheckpoint(const DirectoryHandle& dir,
                                                    const CheckpointData& data,
                                                    uint32_t keep_last) {
  const std::string name = PeriodicCheckpointName(data.step);
  RETURN_IF_ERROR(WriteCheckpoint(dir, name, data));
  const std::string path = dir.PathOf(name);
  absl::StatusOr<std::vector<PeriodicCheckpoint>> all = ListPeriodicCheckpoints(dir);
  if (!all.ok()) return path;  // written; rotation waits for the next write
  // Only this job's own files count and go: a file another job (another fingerprint) left in
  // the directory, or one whose header cannot be read (a symbolic link among them), is never
  // deleted.
  std::vector<const PeriodicCheckpoint*> own;
  for (const PeriodicCheckpoint& file : *all) {
    absl::StatusOr<std::string> fingerprint = ReadCheckpointFingerprint(dir, file.name);
    if (fingerprint.ok() && *fingerprint == data.spec_fingerprint) own.push_back(&file);
  }
  const size_t keep = std::max<uint32_t>(1, keep_last);
  if (own.size() <= keep) return path;
  // A sharded checkpoint's shards go with their manifest (sharded_checkpoint.h), and so do the
  // shards of an older step whose manifest was never written (a crash between the two).
  const absl::StatusOr<std::vector<std::string>> names = dir.ListNames();
  const uint64_t oldest_kept = own[own.size() - keep]->step;
  for (size_t i = 0; i + keep < own.size(); ++i) dir.Remove(own[i]->name).IgnoreError();
  if (!names.ok()) return path;
  for (const std::string& name : *names) {
    const size_t shard = name.find(".shard-");
    if (shard == std::string::npos) continue;
    const std::optional<uint64_t> step = StepOfName(name.substr(0, shard) + kSuffix);
    if (step.has_value() && *step < oldest_kept) dir.Remove(name).IgnoreError();
  }
  return path;
}

absl::StatusOr<std::string> WritePeriodicCheckpoint(const std::string& dir,
                                                    const CheckpointData& data,
                                                    uint32_t keep_last) {
  ASSIGN_OR_RETURN(const DirectoryHandle handle,
                   DirectoryHandle::Open(kKind, dir, /*create=*/true));
  return WritePeriodicCheckpoint(handle, data, keep_last);
}

absl::StatusOr<ResumeSearch> FindResumePoint(const DirectoryHandle& dir,
                                             const std::string& fingerprint) {
  ASSIGN_OR_RETURN(std::vector<PeriodicCheckpoint> all, ListPeriodicCheckpoints(dir));
  ResumeSearch search;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    absl::StatusOr<CheckpointData> data = ReadCheckpoint(dir, it->name);
    if (!data.ok()) {
      search.skipped.push_back(absl::StrCat(it->path, ": ", data.status().message()));
      continue;
    }
    if (data->spec_fingerprint != fingerprint) {
      search.skipped.push_back(absl::StrCat(it->path, ": written by a job with spec fingerprint ",
                                            data->spec_fingerprint, ", not ", fingerprint));
      continue;
    }
    if (IsShardedManifest(*data)) {
      // The manifest commits its shards: each must be there, whole, as recorded.
      const absl::Status shards = VerifyShards(dir, *data);
      if (!shards.ok()) {
        search.skipped.push_back(absl::StrCat(it->path, ": ", shards.message()));
        continue;
      }
    }
    search.found = ResumePoint{it->path, *std::move(data)};
    break;
  }
  return search;
}

absl::StatusOr<ResumeSearch> FindResumePoint(const std::string& dir,
                                             const std::string& fingerprint) {
  absl::StatusOr<DirectoryHandle> handle = DirectoryHandle::Open(kKind, dir, /*create=*/false);
  if (handle.status().code() == absl::StatusCode::kNotFound) return ResumeSearch{};
  if (!handle.ok()) return handle.status();
  return FindResumePoint(*handle, fingerprint);
}

}  // namespace ringleader
