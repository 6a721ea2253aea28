#include "worker/checkpoint/checkpoint_series.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  return dir;
}

CheckpointData StateAt(uint64_t step, const std::string& fingerprint = "fp") {
  CheckpointData data;
  data.step = step;
  data.spec_fingerprint = fingerprint;
  data.tensors.push_back({"w", {2}, {static_cast<float>(step), 1.5f}});
  return data;
}

std::vector<uint64_t> Steps(const std::string& dir) {
  std::vector<uint64_t> steps;
  const absl::StatusOr<std::vector<PeriodicCheckpoint>> all = ListPeriodicCheckpoints(dir);
  EXPECT_TRUE(all.ok()) << all.status();
  for (const PeriodicCheckpoint& c : all.value_or(std::vector<PeriodicCheckpoint>{})) {
    steps.push_back(c.step);
  }
  return steps;
}

void FlipLastByte(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(-1, std::ios::end);
  char c = 0;
  file.get(c);
  file.seekp(-1, std::ios::end);
  file.put(static_cast<char>(c ^ 0x5a));
}

TEST(CheckpointSeries, NamesSortByStep) {
  EXPECT_EQ(PeriodicCheckpointName(40), "step-000000000040.ckpt");
  EXPECT_LT(PeriodicCheckpointName(9), PeriodicCheckpointName(10));
}

TEST(CheckpointSeries, MissingDirectoryHasNoCheckpointsAndNoResumePoint) {
  const std::string dir = FreshDir("missing");
  EXPECT_THAT(*ListPeriodicCheckpoints(dir), SizeIs(0));
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  EXPECT_FALSE(search->found.has_value());
  EXPECT_THAT(search->skipped, SizeIs(0));
}

TEST(CheckpointSeries, KeepsTheNewestAndIgnoresOtherFiles) {
  const std::string dir = FreshDir("rotate");
  for (uint64_t step : {10, 20, 30, 40}) {
    absl::StatusOr<std::string> path = WritePeriodicCheckpoint(dir, StateAt(step), 2);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, absl::StrCat(dir, "/", PeriodicCheckpointName(step)));
  }
  std::ofstream(dir + "/final.ckpt") << "x";
  std::ofstream(dir + "/step-12.ckpt.tmp") << "x";
  EXPECT_THAT(Steps(dir), ElementsAre(30, 40));
}

TEST(CheckpointSeries, ResumesFromTheNewest) {
  const std::string dir = FreshDir("newest");
  for (uint64_t step : {5, 15}) ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(step), 3).ok());
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 15u);
  EXPECT_EQ(search->found->data.tensors[0].data[0], 15.0f);
  EXPECT_THAT(search->skipped, SizeIs(0));
}

TEST(CheckpointSeries, ACorruptNewestIsSkippedNamedAndThePreviousUsed) {
  const std::string dir = FreshDir("corrupt");
  for (uint64_t step : {5, 15}) ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(step), 3).ok());
  const std::string newest = absl::StrCat(dir, "/", PeriodicCheckpointName(15));
  FlipLastByte(newest);
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 5u);
  ASSERT_THAT(search->skipped, SizeIs(1));
  EXPECT_THAT(search->skipped[0], HasSubstr(newest));
  EXPECT_THAT(search->skipped[0], HasSubstr("checksum mismatch"));
}

TEST(CheckpointSeries, AnotherJobsCheckpointIsNotResumed) {
  const std::string dir = FreshDir("foreign");
  ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(7, "other"), 2).ok());
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  EXPECT_FALSE(search->found.has_value());
  ASSERT_THAT(search->skipped, SizeIs(1));
  EXPECT_THAT(search->skipped[0], HasSubstr("spec fingerprint other, not fp"));
}

// A coordinator without --state_dir numbers its jobs from job-000001 again after a restart: a
// new job writing into a directory another job left checkpoints in must not rotate them away,
// nor let them push its own newest files out.
TEST(CheckpointSeries, RotationNeverDeletesAnotherJobsFiles) {
  const std::string dir = FreshDir("shared");
  for (uint64_t step : {80, 88}) {
    ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(step, "old-job"), 2).ok());
  }
  for (uint64_t step : {8, 16, 24}) ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(step), 2).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(16, 24, 80, 88));
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 24u);
  EXPECT_THAT(search->skipped, SizeIs(2));  // the old job's, named
}

TEST(CheckpointSeries, TheFingerprintIsReadFromTheHeaderAlone) {
  const std::string dir = FreshDir("header");
  absl::StatusOr<std::string> path = WritePeriodicCheckpoint(dir, StateAt(3, "abc123"), 2);
  ASSERT_TRUE(path.ok()) << path.status();
  FlipLastByte(*path);  // the CRC no longer matches: the header still says whose file it is
  EXPECT_EQ(ReadCheckpointFingerprint(*path).value_or(""), "abc123");
  std::ofstream(dir + "/not-a-checkpoint") << "hello";
  EXPECT_EQ(ReadCheckpointFingerprint(dir + "/not-a-checkpoint").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCheckpointFingerprint(dir + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringleader
