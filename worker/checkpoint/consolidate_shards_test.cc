// ConsolidateShards: shards of uneven slices made whole again, bit for bit, and every way the
// shards can fail to tile their tensors.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"
#include "checkpoint/shard_test_util.h"
#include "checkpoint/sharded_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/checkpoint/test_model.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

absl::StatusOr<CheckpointData> Consolidate(const std::string& manifest_path) {
  absl::StatusOr<CheckpointData> manifest = ReadCheckpoint(manifest_path);
  if (!manifest.ok()) return manifest.status();
  return ConsolidateShards(manifest_path, *manifest);
}

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile("checkpoint", path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// The checkpoint a trained {4, 3, 2} model with buffers writes: 23 momentum elements
// (fc1.weight 12, fc1.bias 3, fc2.weight 6, fc2.bias 2).
CheckpointData TrainedCheckpoint() {
  std::unique_ptr<Mlp> model = MakeTestModel({4, 3, 2}, /*seed=*/7, /*with_buffers=*/true);
  return CaptureWithMomentum(model.get(), /*step=*/40, "fp");
}

TEST(ConsolidateShardsTest, UnevenShardsOfTwoAndThreeRanksGiveBackTheWholeCheckpointBitForBit) {
  const CheckpointData whole = TrainedCheckpoint();
  const std::string reference = absl::StrCat(FreshDir("consolidate_reference"), "/whole.ckpt");
  ASSERT_TRUE(WriteCheckpoint(reference, whole).ok());
  // Cuts inside fc1.weight, inside fc2.weight, and one leaving rank 1 a single element.
  for (const std::vector<uint64_t>& cuts :
       std::vector<std::vector<uint64_t>>{{7}, {5, 17}, {15, 16}}) {
    SCOPED_TRACE(absl::StrJoin(cuts, ","));
    const std::vector<CheckpointData> shards = ShardLikeZero(whole, cuts);
    ASSERT_GT(shards.back().tensors.size(), 0u);
    const std::string manifest = WriteShards(
        FreshDir(absl::StrCat("consolidate_", cuts.size() + 1, "_", cuts[0])), 40, "fp", shards);
    absl::StatusOr<CheckpointData> data = Consolidate(manifest);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->step, 40u);
    EXPECT_EQ(data->epoch, 1u);
    EXPECT_EQ(data->spec_fingerprint, "fp");
    EXPECT_TRUE(data->attributes.empty()) << data->attributes.begin()->first;
    ASSERT_EQ(data->tensors.size(), whole.tensors.size());
    for (size_t i = 0; i < whole.tensors.size(); ++i) {
      const CheckpointTensor& want = whole.tensors[i];
      const CheckpointTensor& got = data->tensors[i];
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.shape, want.shape) << want.name;
      ASSERT_EQ(got.data.size(), want.data.size()) << want.name;
      EXPECT_EQ(std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)),
                0)
          << want.name;
    }
    // The same file a consolidated checkpoint of that state is.
    const std::string out = absl::StrCat(std::filesystem::path(manifest).parent_path().string(),
                                         "/consolidated.ckpt");
    ASSERT_TRUE(WriteCheckpoint(out, *data).ok());
    EXPECT_EQ(FileBytes(out), FileBytes(reference));
  }
}

// A slice of the tensor `name`: elements [begin, begin + values.size()).
struct SliceSpec {
  std::string name;
  uint64_t begin;
  std::vector<float> values;
};

// Shards of step 10: rank 0's holds w [2, 2] whole, rank r's (rank 0's too) the slices[r].
std::string WriteSliced(const std::string& dir_name,
                        const std::vector<std::vector<SliceSpec>>& slices,
                        const std::string& strategy = "zero2") {
  std::vector<CheckpointData> shards(slices.size());
  for (size_t r = 0; r < slices.size(); ++r) {
    shards[r].step = 10;
    shards[r].spec_fingerprint = "fp";
    if (r == 0) shards[r].tensors.push_back({"w", {2, 2}, {1, 2, 3, 4}});
    for (const SliceSpec& s : slices[r]) AddSlice(&shards[r], s.name, s.begin, s.values);
  }
  return WriteShards(FreshDir(dir_name), 10, "fp", shards, strategy);
}

std::string ShardPath(const std::string& manifest, uint32_t rank, uint32_t world) {
  return absl::StrCat(std::filesystem::path(manifest).parent_path().string(), "/",
                      ShardFileName("step-000000000010.ckpt", rank, world));
}

TEST(ConsolidateShardsTest, SlicedOnlyTensorsTakeTheirSizeFromTheirSlices) {
  const std::string manifest =
      WriteSliced("consolidate_sliced_only", {{{"v", 0, {1, 2}}},
                                              {{"v", 2, {3, 4, 5}}},
                                              {{"w.momentum_buffer", 0, {-1, -2, -3, -4}}}});
  absl::StatusOr<CheckpointData> data = Consolidate(manifest);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->tensors.size(), 3u);
  // The momentum buffer goes right after its parameter; v where first seen.
  EXPECT_EQ(data->tensors[0].name, "w");
  EXPECT_EQ(data->tensors[1].name, "w.momentum_buffer");
  EXPECT_EQ(data->tensors[1].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(data->tensors[1].data, (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(data->tensors[2].name, "v");
  EXPECT_EQ(data->tensors[2].shape, (std::vector<uint64_t>{5}));
  EXPECT_EQ(data->tensors[2].data, (std::vector<float>{1, 2, 3, 4, 5}));
}

// The DATA_LOSS Consolidate reports for `manifest`, checked to name `path`.
std::string DataLoss(const std::string& manifest, const std::string& path) {
  absl::StatusOr<CheckpointData> data = Consolidate(manifest);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss) << data.status();
  EXPECT_THAT(std::string(data.status().message()), HasSubstr(path));
  return std::string(data.status().message());
}

TEST(ConsolidateShardsTest, SlicesThatDoNotTileTheirTensorAreNamed) {
  const std::string m = "w.momentum_buffer";
  std::string manifest = WriteSliced("consolidate_gap", {{{m, 0, {1, 2}}}, {{m, 3, {4}}}});
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("slice w.momentum_buffer [3, 4) leaves elements [2, 3) of "
                        "w.momentum_buffer in no shard"));

  manifest = WriteSliced("consolidate_gap_end", {{{m, 0, {1, 2}}}, {{m, 2, {3}}}});
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("w.momentum_buffer's last slice ends at 3, elements [3, 4) of 4 are in "
                        "no shard"));

  manifest = WriteSliced("consolidate_gap_start", {{{"v", 1, {1, 2}}}, {}});
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 0, 2)),
              HasSubstr("slice v [1, 3) leaves elements [0, 1) of v in no shard"));

  // Far past any real tensor: refused before anything of that size is allocated.
  manifest = WriteSliced("consolidate_far", {{{"v", 0, {1}}}, {{"v", 1000000000000000, {2}}}});
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("leaves elements [1, 1000000000000000) of v in no shard"));

  manifest = WriteSliced("consolidate_overlap", {{{m, 0, {1, 2}}}, {{m, 1, {3, 4, 5}}}});
  const std::string overlap = DataLoss(manifest, ShardPath(manifest, 1, 2));
  EXPECT_THAT(overlap, HasSubstr("slice w.momentum_buffer [1, 4) overlaps elements [1, 2) held "
                                 "by shard " + ShardPath(manifest, 0, 2)));

  manifest = WriteSliced("consolidate_past_end", {{{m, 0, {1, 2}}}, {{m, 2, {3, 4, 5}}}});
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("slice w.momentum_buffer [2, 5) runs past the end of w.momentum_buffer "
                        "(4 elements)"));

  // A whole tensor outside rank 0's shard.
  std::vector<CheckpointData> shards(2);
  for (CheckpointData& shard : shards) {
    shard.step = 10;
    shard.spec_fingerprint = "fp";
  }
  shards[1].tensors.push_back({"w", {2, 2}, {1, 2, 3, 4}});
  manifest = WriteShards(FreshDir("consolidate_whole_elsewhere"), 10, "fp", shards);
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("holds w whole; only rank 0's shard holds whole tensors"));
}

TEST(ConsolidateShardsTest, DamagedMissingAndForeignShardsAreNamed) {
  const std::string m = "w.momentum_buffer";
  const std::vector<std::vector<SliceSpec>> good = {{{m, 0, {1, 2}}}, {{m, 2, {3, 4}}}};
  std::string manifest = WriteSliced("consolidate_good", good);
  ASSERT_TRUE(Consolidate(manifest).ok()) << Consolidate(manifest).status();

  // One byte of rank 1's shard flipped after the manifest recorded its CRC-32.
  manifest = WriteSliced("consolidate_damaged", good);
  const std::string shard1 = ShardPath(manifest, 1, 2);
  std::string bytes = FileBytes(shard1);
  ASSERT_GT(bytes.size(), 40u);
  bytes[bytes.size() - 6] ^= 0x01;
  std::ofstream(shard1, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_THAT(DataLoss(manifest, shard1), HasSubstr("is corrupt: CRC-32"));

  manifest = WriteSliced("consolidate_missing", good);
  std::filesystem::remove(ShardPath(manifest, 1, 2));
  absl::StatusOr<CheckpointData> missing = Consolidate(manifest);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr(ShardPath(manifest, 1, 2) + " does not exist"));

  // Rank 1's shard of step 9 under step 10's name (the manifest's checksum is of that file).
  std::vector<CheckpointData> shards(2);
  for (CheckpointData& shard : shards) {
    shard.step = 10;
    shard.spec_fingerprint = "fp";
  }
  shards[0].tensors.push_back({"w", {2, 2}, {1, 2, 3, 4}});
  AddSlice(&shards[0], m, 0, {1, 2});
  shards[1].step = 9;
  AddSlice(&shards[1], m, 2, {3, 4});
  manifest = WriteShards(FreshDir("consolidate_foreign"), 10, "fp", shards);
  EXPECT_THAT(DataLoss(manifest, ShardPath(manifest, 1, 2)),
              HasSubstr("is of step 9 (fingerprint fp), its manifest of step 10"));
}

// fsdp's shards: no rank holds a parameter whole, each holds slices of parameters and momentum
// (the model's elements concatenated, cut in the middle of fc1.weight and at fc2.weight's last
// element, so rank 0 holds nothing of fc2). Rank 0's recorded layout gives the order and shapes.
TEST(ConsolidateShardsTest, FsdpShardsConsolidateThroughTheRecordedLayout) {
  std::unique_ptr<Mlp> model = MakeTestModel({4, 3, 2}, /*seed=*/9, /*with_buffers=*/false);
  const CheckpointData whole = CaptureWithMomentum(model.get(), /*step=*/30, "fp");
  std::vector<std::string> names;
  std::vector<std::vector<uint64_t>> shapes;
  for (const CheckpointTensor& t : whole.tensors) {
    if (absl::EndsWith(t.name, ".momentum_buffer")) continue;
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  ASSERT_EQ(names.size(), 4u);
  const std::vector<uint64_t> cuts = {5, 20};  // of 23 elements: 12 + 3 + 6 + 2
  std::vector<CheckpointData> shards(3);
  for (CheckpointData& shard : shards) {
    shard.step = 30;
    shard.epoch = 1;
    shard.spec_fingerprint = "fp";
  }
  uint64_t at = 0;
  for (const std::string& name : names) {
    const CheckpointTensor* param = whole.FindTensor(name);
    const CheckpointTensor* momentum = whole.FindTensor(name + ".momentum_buffer");
    ASSERT_NE(momentum, nullptr) << name;
    for (size_t r = 0; r < shards.size(); ++r) {
      const uint64_t lo = r == 0 ? 0 : cuts[r - 1];
      const uint64_t hi = r + 1 < shards.size() ? cuts[r] : 23;
      const uint64_t begin = std::max(lo, at), end = std::min(hi, at + param->data.size());
      if (begin >= end) continue;
      const auto slice = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + (begin - at), v.begin() + (end - at));
      };
      AddSlice(&shards[r], momentum->name, begin - at, slice(momentum->data));
      AddSlice(&shards[r], name, begin - at, slice(param->data));
    }
    at += param->data.size();
  }
  EXPECT_EQ(shards[0].FindTensor("fc2.weight"), nullptr) << "rank 0 holds nothing of fc2";
  RecordModelLayout(&shards[0], names, shapes);
  const std::string manifest = WriteShards(FreshDir("consolidate_fsdp"), 30, "fp", shards, "fsdp");
  absl::StatusOr<CheckpointData> data = Consolidate(manifest);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->attributes.empty()) << data->attributes.begin()->first;
  ASSERT_EQ(data->tensors.size(), whole.tensors.size());
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_EQ(data->tensors[i].name, whole.tensors[i].name);
    EXPECT_EQ(data->tensors[i].shape, whole.tensors[i].shape) << whole.tensors[i].name;
    EXPECT_EQ(data->tensors[i].data, whole.tensors[i].data) << whole.tensors[i].name;
  }

  // A layout naming a parameter no shard holds.
  RecordModelLayout(&shards[0], {"fc1.weight", "fc9.weight"}, {{3, 4}, {2, 2}});
  const std::string bad = WriteShards(FreshDir("consolidate_fsdp_bad"), 30, "fp", shards, "fsdp");
  absl::StatusOr<CheckpointData> refused = Consolidate(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("no shard holds any element of fc9.weight"));
}

}  // namespace
}  // namespace ringleader
