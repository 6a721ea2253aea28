#include "worker/rank/resume.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_series.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/rank/snapshots.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class ResumeTest : public ::testing::Test {
 protected:
  ResumeTest() {
    root_ = absl::StrCat(::testing::TempDir(), "/resume_", ::testing::UnitTest::GetInstance()
                                                              ->current_test_info()
                                                              ->name());
    std::system(absl::StrCat("rm -rf '", root_, "'").c_str());
    spec_.set_checkpoint_dir(root_);
  }

  v1::Assignment Attempt(uint64_t generation, uint32_t rank) const {
    v1::Assignment assignment;
    assignment.set_job_id("job-000007");
    assignment.set_generation(generation);
    assignment.set_rank(rank);
    assignment.set_world_size(2);
    return assignment;
  }

  void WriteAt(uint64_t step) {
    CheckpointData data;
    data.step = step;
    data.spec_fingerprint = "fp";
    data.tensors.push_back({"fc1.weight", {1}, {static_cast<float>(step)}});
    ASSERT_TRUE(WritePeriodicCheckpoint(JobCheckpointDir(spec_, "job-000007"), data, 5).ok());
  }

  std::string root_;
  v1::JobSpec spec_;
  InMemoryKeyValueStore store_;
};

TEST_F(ResumeTest, TheDirectoryIsPerJobAndSafeAsAFileName) {
  EXPECT_EQ(JobCheckpointDir(spec_, "job-000007"), root_ + "/job-000007");
  EXPECT_EQ(JobCheckpointDir(spec_, "../x/y"), root_ + "/job.._x_y");
  EXPECT_EQ(JobCheckpointDir(v1::JobSpec(), "job-000007"), "");
}

TEST_F(ResumeTest, TheFirstGenerationStartsFromTheSeedWithoutTouchingTheStore) {
  WriteAt(10);
  absl::StatusOr<ResumeDecision> decision =
      DecideResume(Attempt(1, 0), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_FALSE(decision->checkpoint.has_value());
  EXPECT_EQ(store_.Get(kResumeKey, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ResumeTest, EveryRankResumesFromTheCheckpointRankZeroChose) {
  WriteAt(10);
  WriteAt(20);
  absl::StatusOr<ResumeDecision> zero =
      DecideResume(Attempt(2, 0), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(zero.ok()) << zero.status();
  ASSERT_TRUE(zero->checkpoint.has_value());
  EXPECT_EQ(zero->checkpoint->step, 20u);
  // A newer file appearing now (an old attempt's late write) does not split the ranks.
  WriteAt(30);
  absl::StatusOr<ResumeDecision> one =
      DecideResume(Attempt(2, 1), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(one->checkpoint.has_value());
  EXPECT_EQ(one->checkpoint->step, 20u);
  EXPECT_EQ(one->path, zero->path);
}

TEST_F(ResumeTest, ACorruptNewestCheckpointIsSkippedByRankZeroAndNamed) {
  WriteAt(10);
  WriteAt(20);
  const std::string newest =
      absl::StrCat(JobCheckpointDir(spec_, "job-000007"), "/", PeriodicCheckpointName(20));
  std::ofstream(newest, std::ios::binary | std::ios::trunc) << "RLCKPT01 garbage";
  absl::StatusOr<ResumeDecision> zero =
      DecideResume(Attempt(3, 0), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(zero.ok()) << zero.status();
  ASSERT_TRUE(zero->checkpoint.has_value());
  EXPECT_EQ(zero->checkpoint->step, 10u);
  ASSERT_THAT(zero->skipped, SizeIs(1));
  EXPECT_THAT(zero->skipped[0], HasSubstr(newest));
}

TEST_F(ResumeTest, NoCheckpointYetStartsEveryRankFromStepZero) {
  absl::StatusOr<ResumeDecision> zero =
      DecideResume(Attempt(2, 0), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_FALSE(zero->checkpoint.has_value());
  absl::StatusOr<ResumeDecision> one =
      DecideResume(Attempt(2, 1), spec_, "fp", &store_, absl::Seconds(1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->checkpoint.has_value());
}

TEST_F(ResumeTest, ACheckpointThisHostCannotReadSaysTheDirectoryMustBeShared) {
  ASSERT_TRUE(store_.Set(kResumeKey, root_ + "/elsewhere/step-000000000010.ckpt").ok());
  absl::StatusOr<ResumeDecision> one =
      DecideResume(Attempt(2, 1), spec_, "fp", &store_, absl::Seconds(1));
  EXPECT_EQ(one.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(one.status().message(), HasSubstr("shared file system"));
}

// The daemon checked checkpoint_dir against its allowed roots before the rank started; a
// symbolic link swapped in since, for checkpoint_dir or the job's directory, is refused.
TEST_F(ResumeTest, ACheckpointDirectoryThatIsASymbolicLinkIsRefused) {
  WriteAt(10);
  const std::string moved = root_ + "-moved";
  std::system(absl::StrCat("rm -rf '", moved, "'").c_str());
  ASSERT_EQ(::rename(root_.c_str(), moved.c_str()), 0);
  ASSERT_EQ(::symlink(moved.c_str(), root_.c_str()), 0);  // checkpoint_dir -> a copy
  absl::StatusOr<ResumeDecision> zero =
      DecideResume(Attempt(2, 0), spec_, "fp", &store_, absl::Seconds(1));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(zero.status().message(),
              HasSubstr(absl::StrCat("checkpoint directory ", root_, " is a symbolic link")));
  EXPECT_EQ(OpenJobCheckpointDir(spec_, "job-000007", /*create=*/true).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The job's own directory as a link inside a real checkpoint_dir: refused too.
  ASSERT_EQ(::unlink(root_.c_str()), 0);
  ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
  ASSERT_EQ(::symlink((moved + "/job-000007").c_str(), (root_ + "/job-000007").c_str()), 0);
  absl::StatusOr<DirectoryHandle> job = OpenJobCheckpointDir(spec_, "job-000007", true);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr(root_ + "/job-000007 is a symbolic link"));
}

TEST_F(ResumeTest, RankRDoesNotReadAPublishedCheckpointThroughASymbolicLink) {
  WriteAt(10);
  const std::string real =
      absl::StrCat(JobCheckpointDir(spec_, "job-000007"), "/", PeriodicCheckpointName(10));
  const std::string link = root_ + "/link.ckpt";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  ASSERT_TRUE(store_.Set(kResumeKey, link).ok());
  absl::StatusOr<ResumeDecision> one =
      DecideResume(Attempt(2, 1), spec_, "fp", &store_, absl::Seconds(1));
  EXPECT_EQ(one.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(one.status().message(), HasSubstr("is a symbolic link"));
}

TEST_F(ResumeTest, RankZeroNeverPublishingIsADeadlineNotAHang) {
  absl::StatusOr<ResumeDecision> one =
      DecideResume(Attempt(2, 1), spec_, "fp", &store_, absl::Milliseconds(10));
  EXPECT_EQ(one.status().code(), absl::StatusCode::kDeadlineExceeded);
}

// Snapshots in memory: every rank's decision, the ranks deciding at once (rank 0 waits for the
// others' newest steps).
class SnapshotDecisionTest : public ResumeTest {
 protected:
  std::string SnapshotDir(uint32_t rank) const { return absl::StrCat(root_, "/snap-", rank); }

  void SnapshotAt(uint32_t rank, uint64_t step) {
    CheckpointData data;
    data.step = step;
    data.spec_fingerprint = "fp";
    data.tensors.push_back({"fc1.weight", {1}, {static_cast<float>(step)}});
    ASSERT_TRUE(
        WriteCheckpoint(absl::StrCat(SnapshotDir(rank), "/", SnapshotFileName(step)), data).ok());
  }

  std::vector<absl::StatusOr<ResumeDecision>> Decide(uint64_t generation = 2) {
    std::vector<absl::StatusOr<ResumeDecision>> decisions(2, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        const SnapshotTier tier{SnapshotDir(rank)};
        decisions[rank] = DecideResume(Attempt(generation, rank), spec_, "fp", &store_,
                                       absl::Seconds(5), &tier);
      });
    }
    for (std::thread& t : threads) t.join();
    return decisions;
  }
};

TEST_F(SnapshotDecisionTest, EveryRankHoldingTheNewestSnapshotResumesFromItsOwn) {
  WriteAt(10);
  SnapshotAt(0, 12);
  SnapshotAt(1, 12);
  const auto decisions = Decide();
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(decisions[rank].ok()) << decisions[rank].status();
    const ResumeDecision& d = *decisions[rank];
    EXPECT_TRUE(d.from_snapshot);
    EXPECT_FALSE(d.heal);
    EXPECT_EQ(d.snapshot_step, 12u);
    ASSERT_TRUE(d.checkpoint.has_value());
    EXPECT_EQ(d.checkpoint->step, 12u);
    EXPECT_EQ(d.path, absl::StrCat(SnapshotDir(rank), "/", SnapshotFileName(12)));
    EXPECT_TRUE(d.snapshot_bytes.empty());  // nobody needs them sent
  }
}

TEST_F(SnapshotDecisionTest, ARankWithoutItIsHealedByTheLowestRankHoldingIt) {
  SnapshotAt(0, 7);  // older: rank 0 takes the step 9 rank 1 holds
  SnapshotAt(1, 9);
  const auto decisions = Decide();
  ASSERT_TRUE(decisions[0].ok()) << decisions[0].status();
  ASSERT_TRUE(decisions[1].ok()) << decisions[1].status();
  EXPECT_TRUE(decisions[0]->heal);
  EXPECT_EQ(decisions[0]->heal_source, 1);
  EXPECT_EQ(decisions[0]->snapshot_step, 9u);
  EXPECT_FALSE(decisions[0]->checkpoint.has_value());  // it receives the state
  EXPECT_THAT(decisions[0]->path, HasSubstr("snapshot of step 9 in rank 1"));
  ASSERT_TRUE(decisions[1]->checkpoint.has_value());
  EXPECT_EQ(decisions[1]->checkpoint->step, 9u);
  EXPECT_FALSE(decisions[1]->snapshot_bytes.empty());  // the source keeps the file to send
}

TEST_F(SnapshotDecisionTest, ANewerCheckpointWinsOverOlderSnapshots) {
  WriteAt(20);
  SnapshotAt(0, 12);
  SnapshotAt(1, 12);
  const auto decisions = Decide();
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(decisions[rank].ok()) << decisions[rank].status();
    EXPECT_FALSE(decisions[rank]->from_snapshot);
    ASSERT_TRUE(decisions[rank]->checkpoint.has_value());
    EXPECT_EQ(decisions[rank]->checkpoint->step, 20u);
  }
}

TEST_F(SnapshotDecisionTest, WithoutSnapshotsOrCheckpointsEveryRankStartsFromTheSeed) {
  spec_.clear_checkpoint_dir();
  const auto decisions = Decide();
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(decisions[rank].ok()) << decisions[rank].status();
    EXPECT_FALSE(decisions[rank]->from_snapshot);
    EXPECT_FALSE(decisions[rank]->checkpoint.has_value());
  }
  // The first generation decides nothing and touches no snapshot.
  for (const auto& d : Decide(1)) EXPECT_FALSE(d->from_snapshot);
}

}  // namespace
}  // namespace ringleader
