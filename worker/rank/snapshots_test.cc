#include "worker/rank/snapshots.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

fs::path Dir(const std::string& tag) {
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) / tag;
  fs::remove_all(dir);
  return dir;
}

CheckpointData State(uint64_t step, const std::string& fingerprint = "fp") {
  CheckpointData data;
  data.step = step;
  data.spec_fingerprint = fingerprint;
  data.tensors.push_back({"fc1.weight", {2}, {static_cast<float>(step), 1.5f}});
  return data;
}

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SnapshotScheduleTest, AFixedIntervalIsEveryNthStep) {
  SnapshotSchedule schedule(3);
  EXPECT_FALSE(schedule.Due(1));
  EXPECT_TRUE(schedule.Due(3));
  schedule.Record(3, absl::Seconds(10), absl::Milliseconds(1));  // the cost changes nothing
  EXPECT_FALSE(schedule.Due(4));
  EXPECT_TRUE(schedule.Due(6));
  EXPECT_EQ(schedule.current_interval(), 3u);
}

TEST(SnapshotScheduleTest, TheAutomaticIntervalKeepsTheCopyUnderFivePercentOfAStep) {
  SnapshotSchedule schedule(0);
  EXPECT_TRUE(schedule.Due(1));  // the first one measures the cost
  // A copy of 1 ms beside a step of 100 ms: 1% of a step, every step.
  schedule.Record(1, absl::Milliseconds(1), absl::Milliseconds(100));
  EXPECT_EQ(schedule.current_interval(), 1u);
  EXPECT_TRUE(schedule.Due(2));
  // A copy of 12 ms beside a step of 100 ms: every ceil(12 / 5) = 3 steps.
  schedule.Record(2, absl::Milliseconds(12), absl::Milliseconds(100));
  EXPECT_EQ(schedule.current_interval(), 3u);
  EXPECT_FALSE(schedule.Due(3));
  EXPECT_FALSE(schedule.Due(4));
  EXPECT_TRUE(schedule.Due(5));
}

TEST(SnapshotWriterTest, WritesEverySnapshotAndKeepsTheNewestTwo) {
  const fs::path dir = Dir("keeps-two");
  {
    SnapshotWriter writer(dir.string());
    for (uint64_t step = 1; step <= 4; ++step) {
      writer.Offer(State(step));
      ASSERT_TRUE(writer.Flush().ok());
    }
    EXPECT_EQ(writer.written(), 4u);
    EXPECT_EQ(writer.dropped(), 0u);
  }
  EXPECT_THAT(Names(dir), ElementsAre(SnapshotFileName(3), SnapshotFileName(4)));
  absl::StatusOr<CheckpointData> read = ReadCheckpoint((dir / SnapshotFileName(4)).string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step, 4u);
  EXPECT_EQ(read->tensors[0].data, State(4).tensors[0].data);
}

TEST(SnapshotWriterTest, TheNewestOfferedSnapshotIsWrittenEvenAtDestruction) {
  const fs::path dir = Dir("newest-wins");
  {
    SnapshotWriter writer(dir.string());
    // Offered faster than written: some wait and are replaced, the last one always lands.
    for (uint64_t step = 1; step <= 50; ++step) writer.Offer(State(step));
  }
  absl::StatusOr<std::optional<LocalSnapshot>> found =
      FindLocalSnapshot(dir.string(), "fp", nullptr);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->step, 50u);
}

TEST(SnapshotWriterTest, AWriteErrorNamesTheDirectory) {
  const fs::path parent = Dir("not-a-directory");
  fs::create_directories(parent);
  std::ofstream(parent / "file") << "x";
  SnapshotWriter writer((parent / "file" / "job").string());
  writer.Offer(State(1));
  const absl::Status flushed = writer.Flush();
  EXPECT_FALSE(flushed.ok());
  EXPECT_THAT(flushed.message(), HasSubstr((parent / "file").string()));
  EXPECT_TRUE(writer.TakeError().ok());  // reported once
}

TEST(SnapshotWriterTest, ASnapshotThatWouldFillItsFileSystemIsRefusedNamingTheFix) {
  const fs::path dir = Dir("room");
  fs::create_directories(dir);
  EXPECT_TRUE(CheckRoomForSnapshot(dir.string(), 1 << 20).ok());
  const absl::Status refused = CheckRoomForSnapshot(dir.string(), uint64_t{1} << 60);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr(dir.string()));
  EXPECT_THAT(refused.message(), HasSubstr("disable_snapshots"));
}

TEST(RankSnapshotsTest, TakesOneWhenDueAndStopsAtTheFirstError) {
  const fs::path dir = Dir("rank-snapshots");
  RankSnapshots snapshots(dir.string(), 2, nullptr);
  int captured = 0;
  auto capture = [&](uint64_t step) {
    return [&, step]() -> absl::StatusOr<CheckpointData> {
      ++captured;
      return State(step);
    };
  };
  EXPECT_TRUE(snapshots.AfterStep(1, absl::Milliseconds(10), capture(1)).ok());
  EXPECT_EQ(captured, 0);  // not due: every 2nd step
  EXPECT_TRUE(snapshots.AfterStep(2, absl::Milliseconds(10), capture(2)).ok());
  EXPECT_EQ(captured, 1);
  EXPECT_THAT(snapshots.Summary(), HasSubstr("1 snapshots in memory written"));
  EXPECT_TRUE(fs::exists(dir / SnapshotFileName(2)));
  const absl::Status ended = snapshots.AfterStep(4, absl::Milliseconds(10), [] {
    return absl::StatusOr<CheckpointData>(absl::InternalError("device lost"));
  });
  EXPECT_THAT(ended.message(), HasSubstr("device lost"));
  EXPECT_FALSE(snapshots.active());
  EXPECT_TRUE(snapshots.AfterStep(6, absl::Milliseconds(10), capture(6)).ok());  // none taken
  EXPECT_EQ(captured, 1);
}

TEST(FindLocalSnapshotTest, TheNewestWholeSnapshotOfThisSpecIsFoundAndTheRestNamed) {
  const fs::path dir = Dir("find");
  ASSERT_TRUE(WriteCheckpoint((dir / SnapshotFileName(5)).string(), State(5)).ok());
  ASSERT_TRUE(WriteCheckpoint((dir / SnapshotFileName(6)).string(), State(6)).ok());
  ASSERT_TRUE(WriteCheckpoint((dir / SnapshotFileName(8)).string(), State(8, "other")).ok());
  std::ofstream(dir / SnapshotFileName(7), std::ios::binary) << "RLCKPT01 torn";
  std::ofstream(dir / (SnapshotFileName(9) + ".tmp")) << "a write that never finished";
  std::vector<std::string> skipped;
  absl::StatusOr<std::optional<LocalSnapshot>> found =
      FindLocalSnapshot(dir.string(), "fp", &skipped);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->step, 6u);
  EXPECT_EQ((*found)->data.tensors[0].data, State(6).tensors[0].data);
  EXPECT_EQ((*found)->path, (dir / SnapshotFileName(6)).string());
  EXPECT_FALSE((*found)->bytes.empty());
  ASSERT_THAT(skipped, SizeIs(2));
  EXPECT_THAT(skipped[0], HasSubstr("another spec"));
  EXPECT_THAT(skipped[1], HasSubstr(SnapshotFileName(7)));
}

TEST(FindLocalSnapshotTest, AMissingDirectoryHoldsNone) {
  absl::StatusOr<std::optional<LocalSnapshot>> found =
      FindLocalSnapshot(Dir("missing").string(), "fp", nullptr);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(found->has_value());
}

TEST(RemoveSnapshotsTest, RemovesTheDirectory) {
  const fs::path dir = Dir("remove");
  ASSERT_TRUE(WriteCheckpoint((dir / SnapshotFileName(1)).string(), State(1)).ok());
  RemoveSnapshots(dir.string());
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace ringleader
