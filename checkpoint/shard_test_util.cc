#include "checkpoint/shard_test_util.h"

#include <algorithm>
#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "checkpoint/checkpoint_series.h"
#include "checkpoint/file_io.h"
#include "checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"

namespace ringleader {

std::string WriteShards(const std::string& dir, uint64_t step, const std::string& fingerprint,
                        const std::vector<CheckpointData>& shards, const std::string& strategy) {
  std::filesystem::create_directories(dir);
  absl::StatusOr<DirectoryHandle> handle = DirectoryHandle::Open("checkpoint", dir, false);
  EXPECT_TRUE(handle.ok()) << handle.status();
  if (!handle.ok()) return "";
  const std::string manifest_name = PeriodicCheckpointName(step);
  const uint32_t world = static_cast<uint32_t>(shards.size());
  for (uint32_t r = 0; r < world; ++r) {
    const absl::Status written =
        WriteCheckpoint(*handle, ShardFileName(manifest_name, r, world), shards[r]);
    EXPECT_TRUE(written.ok()) << written;
  }
  absl::StatusOr<CheckpointData> manifest =
      BuildManifest(*handle, manifest_name, step, /*epoch=*/1, fingerprint, world, strategy);
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  if (!manifest.ok()) return "";
  const absl::Status written = WriteCheckpoint(*handle, manifest_name, *manifest);
  EXPECT_TRUE(written.ok()) << written;
  return handle->PathOf(manifest_name);
}

std::vector<CheckpointData> ShardLikeZero(const CheckpointData& whole,
                                          const std::vector<uint64_t>& cuts) {
  std::vector<CheckpointData> shards(cuts.size() + 1);
  for (CheckpointData& shard : shards) {
    shard.step = whole.step;
    shard.epoch = whole.epoch;
    shard.spec_fingerprint = whole.spec_fingerprint;
  }
  uint64_t offset = 0;  // of the current momentum buffer in the concatenation
  for (const CheckpointTensor& t : whole.tensors) {
    if (!absl::EndsWith(t.name, ".momentum_buffer")) {
      shards[0].tensors.push_back(t);
      continue;
    }
    for (size_t r = 0; r < shards.size(); ++r) {
      const uint64_t rank_begin = r == 0 ? 0 : cuts[r - 1];
      const uint64_t rank_end = r == cuts.size() ? UINT64_MAX : cuts[r];
      const uint64_t begin = std::max(rank_begin, offset);
      const uint64_t end = std::min<uint64_t>(rank_end, offset + t.data.size());
      if (begin >= end) continue;
      AddSlice(&shards[r], t.name, begin - offset,
               std::vector<float>(t.data.begin() + (begin - offset),
                                  t.data.begin() + (end - offset)));
    }
    offset += t.data.size();
  }
  return shards;
}

}  // namespace ringleader
