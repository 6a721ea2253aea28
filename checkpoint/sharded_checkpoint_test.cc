#include "checkpoint/sharded_checkpoint.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "checkpoint/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Step `step` of a 2-rank job: rank 0 holds the whole w [2, 2] and its momentum slice [0, 2),
// rank 1 the slice [2, 4); then the manifest.
void WriteSharded(const DirectoryHandle& dir, uint64_t step, uint32_t keep_last) {
  const std::string manifest = PeriodicCheckpointName(step);
  CheckpointData shard0;
  shard0.step = step;
  shard0.spec_fingerprint = "f";
  shard0.tensors.push_back({"w", {2, 2}, {1, 2, 3, 4}});
  AddSlice(&shard0, "w.momentum_buffer", 0, {0.5f, 0.25f});
  CheckpointData shard1 = shard0;
  shard1.tensors.clear();
  shard1.attributes.clear();
  AddSlice(&shard1, "w.momentum_buffer", 2, {-1.0f, -2.0f});
  ASSERT_TRUE(WriteCheckpoint(dir, ShardFileName(manifest, 0, 2), shard0).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, ShardFileName(manifest, 1, 2), shard1).ok());
  absl::StatusOr<CheckpointData> index = BuildManifest(dir, manifest, step, 0, "f", 2, "zero2");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(WritePeriodicCheckpoint(dir, *index, keep_last).ok());
}

TEST(ShardedCheckpointTest, NamesAndManifest) {
  EXPECT_EQ(ShardFileName("step-000000000040.ckpt", 1, 4), "step-000000000040.shard-1-of-4");
  EXPECT_THAT(
      ShardFilesOf("step-000000000040.ckpt",
                   {"step-000000000040.ckpt", "step-000000000040.shard-0-of-2",
                    "step-000000000041.shard-0-of-2", "step-000000000040.shard-1-of-2"}),
      ::testing::ElementsAre("step-000000000040.shard-0-of-2", "step-000000000040.shard-1-of-2"));
}

TEST(ShardedCheckpointTest, ResumesOnlyWhenEveryShardIsWholeAndAssemblesThisRanksView) {
  const std::string path = FreshDir("sharded");
  absl::StatusOr<DirectoryHandle> dir = DirectoryHandle::Open("checkpoint", path, false);
  ASSERT_TRUE(dir.ok()) << dir.status();
  WriteSharded(*dir, 10, 2);
  WriteSharded(*dir, 20, 2);

  absl::StatusOr<ResumeSearch> search = FindResumePoint(*dir, "f");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 20u);
  EXPECT_TRUE(IsShardedManifest(search->found->data));

  // Rank 1: rank 0's whole w, its own momentum slice, zero elsewhere.
  CheckpointData base;
  base.tensors.push_back({"w", {2, 2}, {9, 9, 9, 9}});
  absl::StatusOr<CheckpointData> view =
      AssembleShards(search->found->path, search->found->data, 1, 2, base);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->step, 20u);
  EXPECT_EQ(view->FindTensor("w")->data, (std::vector<float>{1, 2, 3, 4}));
  ASSERT_NE(view->FindTensor("w.momentum_buffer"), nullptr);
  EXPECT_EQ(view->FindTensor("w.momentum_buffer")->data, (std::vector<float>{0, 0, -1, -2}));
  EXPECT_EQ(view->FindTensor("w.momentum_buffer")->shape, (std::vector<uint64_t>{2, 2}));
  absl::StatusOr<CheckpointData> wrong_world =
      AssembleShards(search->found->path, search->found->data, 1, 4, base);
  EXPECT_EQ(wrong_world.status().code(), absl::StatusCode::kFailedPrecondition);

  // A missing shard: step 20 is skipped naming it, step 10 is taken.
  ASSERT_TRUE(dir->Remove("step-000000000020.shard-1-of-2").ok());
  search = FindResumePoint(*dir, "f");
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_TRUE(search->found.has_value());
  EXPECT_EQ(search->found->data.step, 10u);
  ASSERT_EQ(search->skipped.size(), 1u);
  EXPECT_THAT(search->skipped[0], HasSubstr(path + "/step-000000000020.shard-1-of-2"));
  EXPECT_THAT(search->skipped[0], HasSubstr("does not exist"));
}

TEST(ShardedCheckpointTest, RotationDeletesShardsWithTheirManifestAndUncommittedOnes) {
  const std::string path = FreshDir("rotation");
  absl::StatusOr<DirectoryHandle> dir = DirectoryHandle::Open("checkpoint", path, false);
  ASSERT_TRUE(dir.ok()) << dir.status();
  // A shard of step 5 whose manifest was never written (a crash between the two).
  ASSERT_TRUE(dir->WriteFileAtomically("step-000000000005.shard-0-of-2", "partial").ok());
  for (uint64_t step : {10, 20, 30}) WriteSharded(*dir, step, 2);
  absl::StatusOr<std::vector<std::string>> names = dir->ListNames();
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ::testing::UnorderedElementsAre(
                          "step-000000000020.ckpt", "step-000000000020.shard-0-of-2",
                          "step-000000000020.shard-1-of-2", "step-000000000030.ckpt",
                          "step-000000000030.shard-0-of-2", "step-000000000030.shard-1-of-2"));
}

}  // namespace
}  // namespace ringleader
