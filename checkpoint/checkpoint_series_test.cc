#include "checkpoint/checkpoint_series.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
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

// ---- Symbolic links: never followed, whenever they are swapped in --------------------------

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

bool IsLink(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
}

// A file outside the checkpoint directory that a planted link points to.
std::string Elsewhere(const std::string& name) {
  const std::string path = FreshDir(name);
  std::ofstream(path) << "not yours";
  return path;
}

TEST(CheckpointSeriesLinks, ALinkPlantedAsTheFileNameIsReplacedNeverWrittenThrough) {
  const std::string dir = FreshDir("link_final");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string target = Elsewhere("link_final_target");
  const std::string planted = absl::StrCat(dir, "/", PeriodicCheckpointName(10));
  ASSERT_EQ(::symlink(target.c_str(), planted.c_str()), 0);

  absl::StatusOr<std::string> written = WritePeriodicCheckpoint(dir, StateAt(10), 2);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, planted);
  EXPECT_EQ(Contents(target), "not yours");
  EXPECT_FALSE(IsLink(planted)) << "the link itself was replaced by the checkpoint";
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(planted);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step, 10u);
}

TEST(CheckpointSeriesLinks, ALinkPlantedAsTheTemporaryFileIsRemovedNeverWrittenThrough) {
  const std::string dir = FreshDir("link_tmp");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string target = Elsewhere("link_tmp_target");
  const std::string final_path = absl::StrCat(dir, "/", PeriodicCheckpointName(10));
  ASSERT_EQ(::symlink(target.c_str(), (final_path + ".tmp").c_str()), 0);

  ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(10), 2).ok());
  EXPECT_EQ(Contents(target), "not yours");
  EXPECT_TRUE(ReadCheckpoint(final_path).ok());
  EXPECT_NE(::access((final_path + ".tmp").c_str(), F_OK), 0) << "no temporary file is left";
  EXPECT_FALSE(IsLink(final_path + ".tmp"));
}

TEST(CheckpointSeriesLinks, ACheckpointDirectoryThatIsALinkIsRefusedWithAClearError) {
  const std::string real = FreshDir("link_dir_real");
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  const std::string dir = FreshDir("link_dir");
  ASSERT_EQ(::symlink(real.c_str(), dir.c_str()), 0);

  absl::StatusOr<std::string> written = WritePeriodicCheckpoint(dir, StateAt(10), 2);
  ASSERT_EQ(written.status().code(), absl::StatusCode::kFailedPrecondition) << written.status();
  const std::string message(written.status().message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat("checkpoint directory ", dir)));
  EXPECT_THAT(message, HasSubstr("is a symbolic link"));
  EXPECT_THAT(Steps(real), SizeIs(0)) << "nothing was written through the link";
  // A trailing slash would make the kernel follow it: refused all the same.
  EXPECT_EQ(WritePeriodicCheckpoint(dir + "/", StateAt(10), 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ListPeriodicCheckpoints(dir).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FindResumePoint(dir, "fp").status().code(), absl::StatusCode::kFailedPrecondition);
  // So is the final checkpoint written into it.
  const absl::Status final_written = WriteCheckpoint(dir + "/final.ckpt", StateAt(10));
  EXPECT_EQ(final_written.code(), absl::StatusCode::kFailedPrecondition) << final_written;
  EXPECT_NE(::access((real + "/final.ckpt").c_str(), F_OK), 0);
}

TEST(CheckpointSeriesLinks, AnOpenedDirectoryKeepsItsWritesWhenALinkIsSwappedInForIt) {
  const std::string dir = FreshDir("swap");
  const std::string moved = FreshDir("swap_moved");
  const std::string elsewhere = FreshDir("swap_elsewhere");
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0755), 0);
  absl::StatusOr<DirectoryHandle> opened = DirectoryHandle::Open("checkpoint", dir, true);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(WritePeriodicCheckpoint(*opened, StateAt(10), 2).ok());

  // After the check and the open: the directory is moved away and a link takes its name.
  ASSERT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), dir.c_str()), 0);
  ASSERT_TRUE(WritePeriodicCheckpoint(*opened, StateAt(20), 2).ok());
  absl::StatusOr<ResumeSearch> search = FindResumePoint(*opened, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 20u);

  EXPECT_THAT(Steps(moved), ElementsAre(10, 20)) << "the writes stayed in the opened directory";
  EXPECT_THAT(Steps(elsewhere), SizeIs(0));
  EXPECT_EQ(WritePeriodicCheckpoint(dir, StateAt(30), 2).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "opened again by path, the link is refused";
}

TEST(CheckpointSeriesLinks, ACheckpointFileThatIsALinkIsNeitherResumedNorRotatedAway) {
  const std::string dir = FreshDir("link_read");
  for (uint64_t step : {5, 15}) ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(step), 3).ok());
  // A whole checkpoint of this job outside the directory, linked in as the newest.
  const std::string outside = FreshDir("link_read_outside.ckpt");
  ASSERT_TRUE(WriteCheckpoint(outside, StateAt(99)).ok());
  const std::string planted = absl::StrCat(dir, "/", PeriodicCheckpointName(99));
  ASSERT_EQ(::symlink(outside.c_str(), planted.c_str()), 0);

  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 15u);
  ASSERT_THAT(search->skipped, SizeIs(1));
  EXPECT_THAT(search->skipped[0], HasSubstr(planted));
  EXPECT_THAT(search->skipped[0], HasSubstr("is a symbolic link"));
  EXPECT_EQ(ReadCheckpoint(planted).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadCheckpointFingerprint(planted).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Rotation keeps 1 of this job's files: the link is not one of them (its header is not read).
  ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(25), 1).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(25, 99));
  EXPECT_TRUE(IsLink(planted));
  EXPECT_TRUE(ReadCheckpoint(outside).ok()) << "the link's target is untouched";
}

TEST(CheckpointSeriesLinks, AFifoPlantedAsACheckpointIsRefusedWithoutBlocking) {
  const std::string dir = FreshDir("fifo");
  ASSERT_TRUE(WritePeriodicCheckpoint(dir, StateAt(5), 3).ok());
  const std::string fifo = absl::StrCat(dir, "/", PeriodicCheckpointName(50));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  absl::StatusOr<ResumeSearch> search = FindResumePoint(dir, "fp");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 5u);
  ASSERT_THAT(search->skipped, SizeIs(1));
  EXPECT_THAT(search->skipped[0], HasSubstr("is not a regular file"));
}

}  // namespace
}  // namespace ringleader
