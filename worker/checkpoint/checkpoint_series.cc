// Periodic checkpoints of a job: naming, rotation and the choice of a resume point.
#include "worker/checkpoint/checkpoint_series.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

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

absl::StatusOr<std::vector<PeriodicCheckpoint>> ListPeriodicCheckpoints(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(opendir(dir.c_str()), closedir);
  if (handle == nullptr) {
    if (errno == ENOENT) return std::vector<PeriodicCheckpoint>{};
    return absl::ErrnoToStatus(errno, absl::StrCat("listing checkpoint directory ", dir));
  }
  std::vector<PeriodicCheckpoint> found;
  while (const dirent* entry = readdir(handle.get())) {
    const std::optional<uint64_t> step = StepOfName(entry->d_name);
    if (step.has_value()) found.push_back({*step, absl::StrCat(dir, "/", entry->d_name)});
  }
  std::sort(found.begin(), found.end(),
            [](const PeriodicCheckpoint& a, const PeriodicCheckpoint& b) { return a.step < b.step; });
  return found;
}

absl::StatusOr<std::string> WritePeriodicCheckpoint(const std::string& dir,
                                                    const CheckpointData& data,
                                                    uint32_t keep_last) {
  const std::string path = absl::StrCat(dir, "/", PeriodicCheckpointName(data.step));
  RETURN_IF_ERROR(WriteCheckpoint(path, data));
  absl::StatusOr<std::vector<PeriodicCheckpoint>> all = ListPeriodicCheckpoints(dir);
  if (!all.ok()) return path;  // written; rotation waits for the next write
  // Only this job's own files count and go: a file another job (another fingerprint) left in
  // the directory, or one whose header cannot be read, is never deleted.
  std::vector<const PeriodicCheckpoint*> own;
  for (const PeriodicCheckpoint& file : *all) {
    absl::StatusOr<std::string> fingerprint = ReadCheckpointFingerprint(file.path);
    if (fingerprint.ok() && *fingerprint == data.spec_fingerprint) own.push_back(&file);
  }
  const size_t keep = std::max<uint32_t>(1, keep_last);
  for (size_t i = 0; i + keep < own.size(); ++i) std::remove(own[i]->path.c_str());
  return path;
}

absl::StatusOr<ResumeSearch> FindResumePoint(const std::string& dir,
                                             const std::string& fingerprint) {
  ASSIGN_OR_RETURN(std::vector<PeriodicCheckpoint> all, ListPeriodicCheckpoints(dir));
  ResumeSearch search;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    absl::StatusOr<CheckpointData> data = ReadCheckpoint(it->path);
    if (!data.ok()) {
      search.skipped.push_back(absl::StrCat(it->path, ": ", data.status().message()));
      continue;
    }
    if (data->spec_fingerprint != fingerprint) {
      search.skipped.push_back(absl::StrCat(it->path, ": written by a job with spec fingerprint ",
                                            data->spec_fingerprint, ", not ", fingerprint));
      continue;
    }
    search.found = ResumePoint{it->path, *std::move(data)};
    break;
  }
  return search;
}

}  // namespace ringleader
