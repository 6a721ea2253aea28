#include "worker/rank/snapshots.h"

#include <sys/vfs.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "checkpoint/file_io.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr char kPrefix[] = "step-";
constexpr char kSuffix[] = ".snap";

// The step of a snapshot file name, or none for anything else (".tmp" files included).
std::optional<uint64_t> StepOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) {
    return std::nullopt;
  }
  uint64_t step = 0;
  if (!absl::SimpleAtoi(name, &step)) return std::nullopt;
  return step;
}

// Snapshot files of `dir`, newest first.
absl::StatusOr<std::vector<std::pair<uint64_t, std::string>>> ListSnapshots(
    const DirectoryHandle& dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, dir.ListNames());
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const std::string& name : names) {
    if (std::optional<uint64_t> step = StepOf(name)) found.emplace_back(*step, name);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  return found;
}

}  // namespace

std::string SnapshotFileName(uint64_t step) { return absl::StrCat(kPrefix, step, kSuffix); }

absl::Status CheckRoomForSnapshot(const std::string& dir, uint64_t bytes) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return absl::OkStatus();  // the write says what is wrong
  const uint64_t size = static_cast<uint64_t>(fs.f_blocks) * fs.f_bsize;
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize;
  constexpr decltype(fs.f_type) kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC, linux/magic.h
  const uint64_t keep = fs.f_type == kTmpfsMagic
                            ? std::max<uint64_t>(kSnapshotReserveBytes, size / 4)
                            : kSnapshotReserveBytes;
  if (free >= bytes + keep) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "a snapshot of ", bytes >> 20, " MiB would leave less than ", keep >> 20, " MiB of the ",
      size >> 20, " MiB file system holding ", dir, " free (", free >> 20,
      " MiB free now; the shared-memory collective needs it too): give the worker daemon a "
      "larger --snapshot_dir, or set disable_snapshots: true"));
}

bool SnapshotSchedule::Due(uint64_t step) const {
  if (interval_ > 0) return step % interval_ == 0;
  return step >= next_;
}

void SnapshotSchedule::Record(uint64_t step, absl::Duration cost_time, absl::Duration step_time) {
  if (interval_ > 0) return;
  const double budget = kSnapshotBudget * absl::ToDoubleSeconds(step_time);
  const double cost = absl::ToDoubleSeconds(cost_time);
  auto_interval_ = budget <= 0 ? 1 : std::max<uint64_t>(1, std::ceil(cost / budget));
  next_ = step + auto_interval_;
}

SnapshotWriter::SnapshotWriter(std::string dir, Clock* clock)
    : dir_(std::move(dir)),
      clock_(clock != nullptr ? clock : Clock::Real()),
      thread_([this] { Loop(); }) {}

SnapshotWriter::~SnapshotWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool SnapshotWriter::Offer(CheckpointData state) {
  absl::MutexLock lock(&mu_);
  const bool replaced = pending_.has_value();
  if (replaced) ++dropped_;
  pending_ = std::move(state);
  busy_ = true;
  return !replaced;
}

absl::Status SnapshotWriter::Flush() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* busy) { return !*busy; }, &busy_));
  return std::exchange(error_, absl::OkStatus());
}

absl::Status SnapshotWriter::TakeError() {
  absl::MutexLock lock(&mu_);
  return std::exchange(error_, absl::OkStatus());
}

absl::Duration SnapshotWriter::last_write() const {
  absl::MutexLock lock(&mu_);
  return last_write_;
}

uint64_t SnapshotWriter::written() const {
  absl::MutexLock lock(&mu_);
  return written_;
}

uint64_t SnapshotWriter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void SnapshotWriter::Loop() {
  while (true) {
    CheckpointData state;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SnapshotWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->pending_.has_value() || w->stopping_;
          },
          this));
      if (!pending_.has_value()) return;  // stopping, nothing left to write
      state = *std::move(pending_);
      pending_.reset();
    }
    const absl::Time start = clock_->Now();
    absl::Status written = Write(state);  // no lock held: the disk (tmpfs) write
    absl::MutexLock lock(&mu_);
    last_write_ = clock_->Now() - start;
    busy_ = pending_.has_value();
    if (written.ok()) {
      ++written_;
    } else if (error_.ok()) {
      error_ = std::move(written);
    }
  }
}

absl::Status SnapshotWriter::Write(const CheckpointData& state) {
  ASSIGN_OR_RETURN(const DirectoryHandle dir,
                   DirectoryHandle::Open("snapshot", dir_, /*create=*/true));
  uint64_t bytes = 0;
  for (const CheckpointTensor& t : state.tensors) bytes += t.data.size() * sizeof(float);
  RETURN_IF_ERROR(CheckRoomForSnapshot(dir_, bytes));
  RETURN_IF_ERROR(WriteCheckpoint(dir, SnapshotFileName(state.step), state));
  ASSIGN_OR_RETURN(const auto snapshots, ListSnapshots(dir));
  for (size_t i = kSnapshotsKept; i < snapshots.size(); ++i) {
    dir.Remove(snapshots[i].second).IgnoreError();  // gone already is as good
  }
  return absl::OkStatus();
}

RankSnapshots::RankSnapshots(std::string dir, uint32_t interval, Clock* clock)
    : schedule_(interval),
      writer_(std::make_unique<SnapshotWriter>(std::move(dir), clock)),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

absl::Status RankSnapshots::AfterStep(
    uint64_t step, absl::Duration step_time,
    const std::function<absl::StatusOr<CheckpointData>()>& capture) {
  if (writer_ == nullptr || !schedule_.Due(step)) return absl::OkStatus();
  absl::Status failed = writer_->TakeError();
  if (failed.ok()) {
    const absl::Time start = clock_->Now();
    absl::StatusOr<CheckpointData> state = capture();
    if (state.ok()) {
      const absl::Duration copy = clock_->Now() - start;
      writer_->Offer(*std::move(state));
      schedule_.Record(step, copy + writer_->last_write(), step_time);
      return absl::OkStatus();
    }
    failed = state.status();
  }
  writer_.reset();
  return failed;
}

std::string RankSnapshots::Summary() {
  if (writer_ == nullptr) return "";
  writer_->Flush().IgnoreError();
  return absl::StrFormat(
      "%d snapshots in memory written (%d replaced while waiting), every %d step(s) at the end, "
      "the last write took %s",
      writer_->written(), writer_->dropped(), schedule_.current_interval(),
      absl::FormatDuration(writer_->last_write()));
}

absl::StatusOr<std::optional<LocalSnapshot>> FindLocalSnapshot(const std::string& dir,
                                                               const std::string& fingerprint,
                                                               std::vector<std::string>* skipped) {
  absl::StatusOr<DirectoryHandle> opened = DirectoryHandle::Open("snapshot", dir, false);
  if (opened.status().code() == absl::StatusCode::kNotFound) return std::nullopt;
  RETURN_IF_ERROR(opened.status());
  ASSIGN_OR_RETURN(const auto snapshots, ListSnapshots(*opened));
  for (const auto& [step, name] : snapshots) {
    const std::string path = opened->PathOf(name);
    absl::StatusOr<std::string> bytes = opened->ReadFile(name);
    absl::StatusOr<CheckpointData> data =
        bytes.ok() ? DecodeCheckpoint(path, *bytes) : absl::StatusOr<CheckpointData>(bytes.status());
    if (data.ok() && data->spec_fingerprint != fingerprint) {
      data = absl::FailedPreconditionError(
          absl::StrCat("snapshot ", path, " belongs to another spec (fingerprint ",
                       data->spec_fingerprint, ", this job's ", fingerprint, ")"));
    }
    if (data.ok() && data->step != step) {
      data = absl::DataLossError(absl::StrCat("snapshot ", path, " holds step ", data->step));
    }
    if (!data.ok()) {
      if (skipped != nullptr) skipped->push_back(std::string(data.status().message()));
      continue;
    }
    LocalSnapshot found;
    found.step = step;
    found.path = path;
    found.bytes = *std::move(bytes);
    found.data = *std::move(data);
    return found;
  }
  return std::nullopt;
}

void RemoveSnapshots(const std::string& dir) {
  std::error_code error;
  std::filesystem::remove_all(dir, error);
}

}  // namespace ringleader
