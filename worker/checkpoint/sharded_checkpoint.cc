// Shard files and their manifest: naming, the manifest's checksums, and reassembly on resume.
#include "worker/checkpoint/sharded_checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr char kFormatKey[] = "checkpoint.format";
constexpr char kSliceKey[] = "slice.";

std::string Stem(const std::string& manifest_name) {
  absl::string_view stem = manifest_name;
  absl::ConsumeSuffix(&stem, ".ckpt");
  return std::string(stem);
}

uint32_t Crc32(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string Attribute(const CheckpointData& data, const std::string& key) {
  const auto it = data.attributes.find(key);
  return it == data.attributes.end() ? "" : it->second;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

absl::StatusOr<std::string> ShardName(const CheckpointData& manifest, uint32_t rank,
                                      const std::string& where) {
  const std::string name = Attribute(manifest, absl::StrCat("shard.", rank, ".name"));
  if (name.empty()) {
    return absl::DataLossError(
        absl::StrCat("sharded checkpoint ", where, " names no shard for rank ", rank));
  }
  return name;
}

// `shard` read from `path` belongs to `manifest`.
absl::Status CheckBelongs(const std::string& path, const CheckpointData& shard,
                          const CheckpointData& manifest) {
  if (shard.step != manifest.step || shard.spec_fingerprint != manifest.spec_fingerprint) {
    return absl::DataLossError(absl::StrCat(
        "shard ", path, " is of step ", shard.step, " (fingerprint ", shard.spec_fingerprint,
        "), its manifest of step ", manifest.step, " (", manifest.spec_fingerprint, ")"));
  }
  return absl::OkStatus();
}

CheckpointTensor* Find(CheckpointData* data, const std::string& name) {
  for (CheckpointTensor& t : data->tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The tensor a momentum slice goes into: made whole-sized (its parameter's shape) if missing.
CheckpointTensor* MomentumTarget(CheckpointData* base, const std::string& name) {
  if (CheckpointTensor* t = Find(base, name)) return t;
  absl::string_view parameter = name;
  if (!absl::ConsumeSuffix(&parameter, ".momentum_buffer")) return nullptr;
  const CheckpointTensor* p = Find(base, std::string(parameter));
  if (p == nullptr) return nullptr;
  base->tensors.push_back({name, p->shape, std::vector<float>(p->data.size(), 0.0f)});
  return &base->tensors.back();
}

}  // namespace

std::string ShardFileName(const std::string& manifest_name, uint32_t rank, uint32_t world) {
  return absl::StrCat(Stem(manifest_name), ".shard-", rank, "-of-", world);
}

std::vector<std::string> ShardFilesOf(const std::string& manifest_name,
                                      const std::vector<std::string>& names) {
  const std::string prefix = absl::StrCat(Stem(manifest_name), ".shard-");
  std::vector<std::string> shards;
  for (const std::string& name : names) {
    if (absl::StartsWith(name, prefix)) shards.push_back(name);
  }
  return shards;
}

bool IsShardedManifest(const CheckpointData& data) {
  return Attribute(data, kFormatKey) == "sharded";
}

void AddSlice(CheckpointData* shard, const std::string& name, uint64_t begin,
              std::vector<float> values) {
  shard->attributes[absl::StrCat(kSliceKey, name)] = absl::StrCat(begin);
  const uint64_t n = values.size();
  shard->tensors.push_back({name, {n}, std::move(values)});
}

absl::StatusOr<CheckpointData> BuildManifest(const DirectoryHandle& dir,
                                             const std::string& manifest_name, uint64_t step,
                                             uint64_t epoch, const std::string& fingerprint,
                                             uint32_t world, const std::string& strategy) {
  CheckpointData manifest;
  manifest.step = step;
  manifest.epoch = epoch;
  manifest.spec_fingerprint = fingerprint;
  manifest.attributes[kFormatKey] = "sharded";
  manifest.attributes["world_size"] = absl::StrCat(world);
  manifest.attributes["strategy"] = strategy;
  for (uint32_t r = 0; r < world; ++r) {
    const std::string name = ShardFileName(manifest_name, r, world);
    ASSIGN_OR_RETURN(const std::string bytes, dir.ReadFile(name));
    manifest.attributes[absl::StrCat("shard.", r, ".name")] = name;
    manifest.attributes[absl::StrCat("shard.", r, ".bytes")] = absl::StrCat(bytes.size());
    manifest.attributes[absl::StrCat("shard.", r, ".crc32")] = absl::StrCat(Crc32(bytes));
  }
  return manifest;
}

absl::Status VerifyShards(const DirectoryHandle& dir, const CheckpointData& manifest) {
  uint32_t world = 0;
  if (!absl::SimpleAtoi(Attribute(manifest, "world_size"), &world) || world == 0) {
    return absl::DataLossError("sharded checkpoint manifest has no world_size");
  }
  for (uint32_t r = 0; r < world; ++r) {
    ASSIGN_OR_RETURN(const std::string name, ShardName(manifest, r, "manifest"));
    const std::string path = dir.PathOf(name);
    ASSIGN_OR_RETURN(const std::string bytes, dir.ReadFile(name));
    const std::string size = absl::StrCat(bytes.size());
    const std::string expected_size = Attribute(manifest, absl::StrCat("shard.", r, ".bytes"));
    if (size != expected_size) {
      return absl::DataLossError(
          absl::StrCat("shard ", path, " has ", size, " bytes, its manifest says ", expected_size));
    }
    const std::string crc = absl::StrCat(Crc32(bytes));
    const std::string expected_crc = Attribute(manifest, absl::StrCat("shard.", r, ".crc32"));
    if (crc != expected_crc) {
      return absl::DataLossError(absl::StrCat("shard ", path, " is corrupt: CRC-32 ", crc,
                                              ", its manifest says ", expected_crc));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointData> AssembleShards(const std::string& manifest_path,
                                              const CheckpointData& manifest, uint32_t rank,
                                              uint32_t world, CheckpointData base) {
  if (Attribute(manifest, "world_size") != absl::StrCat(world)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sharded checkpoint ", manifest_path, " was written by ",
                     Attribute(manifest, "world_size"), " ranks, this job has ", world));
  }
  const std::string dir = DirectoryOf(manifest_path);
  base.step = manifest.step;
  base.epoch = manifest.epoch;
  base.spec_fingerprint = manifest.spec_fingerprint;
  std::vector<uint32_t> ranks = {0};
  if (rank != 0) ranks.push_back(rank);
  for (uint32_t r : ranks) {
    ASSIGN_OR_RETURN(const std::string name, ShardName(manifest, r, manifest_path));
    const std::string path = absl::StrCat(dir, "/", name);
    ASSIGN_OR_RETURN(const CheckpointData shard, ReadCheckpoint(path));
    RETURN_IF_ERROR(CheckBelongs(path, shard, manifest));
    for (const CheckpointTensor& t : shard.tensors) {
      const std::string begin_text = Attribute(shard, absl::StrCat(kSliceKey, t.name));
      if (begin_text.empty()) {
        // Rank 0's whole tensors (parameters and buffers).
        if (CheckpointTensor* target = Find(&base, t.name)) {
          *target = t;
        } else {
          base.tensors.push_back(t);
        }
        continue;
      }
      if (r != rank) continue;  // another rank's slice
      uint64_t begin = 0;
      CheckpointTensor* target = MomentumTarget(&base, t.name);
      if (!absl::SimpleAtoi(begin_text, &begin) || target == nullptr ||
          begin > target->data.size() || t.data.size() > target->data.size() - begin) {
        return absl::DataLossError(absl::StrCat("shard ", path, ": slice ", t.name, " at ",
                                                begin_text, " does not fit the model's tensor"));
      }
      std::copy(t.data.begin(), t.data.end(), target->data.begin() + begin);
    }
  }
  return base;
}

}  // namespace ringleader
