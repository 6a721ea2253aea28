// Shard files and their manifest: naming, the manifest's checksums, reassembly on resume, and
// consolidation into one checkpoint.
#include "checkpoint/sharded_checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr char kFormatKey[] = "checkpoint.format";
constexpr char kSliceKey[] = "slice.";
constexpr char kShardKey[] = "shard.";
constexpr char kMomentumSuffix[] = ".momentum_buffer";
// RecordModelLayout's attributes (fsdp's rank 0).
constexpr char kLayoutNamesKey[] = "layout.names";
constexpr char kLayoutShapeKey[] = "layout.shape.";
constexpr char kKind[] = "checkpoint";

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

// The manifest's world size; `where` names it in the message.
absl::StatusOr<uint32_t> WorldSize(const CheckpointData& manifest, const std::string& where) {
  uint32_t world = 0;
  if (!absl::SimpleAtoi(Attribute(manifest, "world_size"), &world) || world == 0) {
    return absl::DataLossError(absl::StrCat("sharded checkpoint ", where, " has no world_size"));
  }
  return world;
}

// The file name of rank `rank`'s shard: one path component, as BuildManifest records it.
absl::StatusOr<std::string> ShardName(const CheckpointData& manifest, uint32_t rank,
                                      const std::string& where) {
  const std::string name = Attribute(manifest, absl::StrCat(kShardKey, rank, ".name"));
  if (name.empty()) {
    return absl::DataLossError(
        absl::StrCat("sharded checkpoint ", where, " names no shard for rank ", rank));
  }
  if (name == "." || name == ".." || absl::StrContains(name, '/')) {
    return absl::DataLossError(absl::StrCat("sharded checkpoint ", where, " names the shard '",
                                            name, "' for rank ", rank,
                                            ", which is not a file name in its directory"));
  }
  return name;
}

// `bytes`, read from `path`, have the size and CRC-32 the manifest records for rank `rank`.
absl::Status CheckShardBytes(const CheckpointData& manifest, uint32_t rank,
                             const std::string& path, const std::string& bytes) {
  const std::string size = absl::StrCat(bytes.size());
  const std::string expected_size = Attribute(manifest, absl::StrCat(kShardKey, rank, ".bytes"));
  if (size != expected_size) {
    return absl::DataLossError(
        absl::StrCat("shard ", path, " has ", size, " bytes, its manifest says ", expected_size));
  }
  const std::string crc = absl::StrCat(Crc32(bytes));
  const std::string expected_crc = Attribute(manifest, absl::StrCat(kShardKey, rank, ".crc32"));
  if (crc != expected_crc) {
    return absl::DataLossError(absl::StrCat("shard ", path, " is corrupt: CRC-32 ", crc,
                                            ", its manifest says ", expected_crc));
  }
  return absl::OkStatus();
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

struct Shard {
  std::string path;
  CheckpointData data;
};

// Rank `rank`'s shard of the manifest read from `manifest_path`: read once with O_NOFOLLOW from
// the manifest's directory, with `verify` checked against the manifest's size and CRC-32,
// decoded, and checked to be of the manifest's step and fingerprint.
absl::StatusOr<Shard> ReadShard(const std::string& manifest_path, const CheckpointData& manifest,
                                uint32_t rank, bool verify) {
  ASSIGN_OR_RETURN(const std::string name, ShardName(manifest, rank, manifest_path));
  Shard shard;
  shard.path = absl::StrCat(DirectoryOf(manifest_path), "/", name);
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileNoFollow(kKind, shard.path));
  if (verify) RETURN_IF_ERROR(CheckShardBytes(manifest, rank, shard.path, bytes));
  ASSIGN_OR_RETURN(shard.data, DecodeCheckpoint(shard.path, bytes));
  RETURN_IF_ERROR(CheckBelongs(shard.path, shard.data, manifest));
  return shard;
}

// Where the slice `t` of `shard` begins, or nullopt for a whole tensor.
absl::StatusOr<std::optional<uint64_t>> SliceBegin(const Shard& shard,
                                                   const CheckpointTensor& t) {
  const std::string text = Attribute(shard.data, absl::StrCat(kSliceKey, t.name));
  if (text.empty()) return std::nullopt;
  uint64_t begin = 0;
  if (!absl::SimpleAtoi(text, &begin) ||
      begin > std::numeric_limits<uint64_t>::max() - t.data.size()) {
    return absl::DataLossError(absl::StrCat("shard ", shard.path, ": slice ", t.name,
                                            " begins at '", text, "', not an element index"));
  }
  return begin;
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
  if (!absl::ConsumeSuffix(&parameter, kMomentumSuffix)) return nullptr;
  const CheckpointTensor* p = Find(base, std::string(parameter));
  if (p == nullptr) return nullptr;
  base->tensors.push_back({name, p->shape, std::vector<float>(p->data.size(), 0.0f)});
  return &base->tensors.back();
}

// AssembleShards for one shard: its whole tensors over `base`, and its slices too if `own`.
absl::Status Overlay(const Shard& shard, bool own, CheckpointData* base) {
  for (const CheckpointTensor& t : shard.data.tensors) {
    ASSIGN_OR_RETURN(const std::optional<uint64_t> begin, SliceBegin(shard, t));
    if (!begin.has_value()) {
      // Rank 0's whole tensors (parameters and buffers).
      if (CheckpointTensor* target = Find(base, t.name)) {
        *target = t;
      } else {
        base->tensors.push_back(t);
      }
      continue;
    }
    if (!own) continue;  // another rank's slice
    CheckpointTensor* target = MomentumTarget(base, t.name);
    if (target == nullptr || *begin > target->data.size() ||
        t.data.size() > target->data.size() - *begin) {
      return absl::DataLossError(absl::StrCat("shard ", shard.path, ": slice ", t.name, " at ",
                                              *begin, " does not fit the model's tensor"));
    }
    std::copy(t.data.begin(), t.data.end(), target->data.begin() + *begin);
  }
  return absl::OkStatus();
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

void RecordModelLayout(CheckpointData* shard, const std::vector<std::string>& names,
                       const std::vector<std::vector<uint64_t>>& shapes) {
  shard->attributes[kLayoutNamesKey] = absl::StrJoin(names, ",");
  for (size_t i = 0; i < names.size() && i < shapes.size(); ++i) {
    shard->attributes[kLayoutShapeKey + names[i]] = absl::StrJoin(shapes[i], "x");
  }
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
  ASSIGN_OR_RETURN(const uint32_t world, WorldSize(manifest, "manifest"));
  for (uint32_t r = 0; r < world; ++r) {
    ASSIGN_OR_RETURN(const std::string name, ShardName(manifest, r, "manifest"));
    ASSIGN_OR_RETURN(const std::string bytes, dir.ReadFile(name));
    RETURN_IF_ERROR(CheckShardBytes(manifest, r, dir.PathOf(name), bytes));
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
  base.step = manifest.step;
  base.epoch = manifest.epoch;
  base.spec_fingerprint = manifest.spec_fingerprint;
  std::vector<uint32_t> ranks = {0};
  if (rank != 0) ranks.push_back(rank);
  for (uint32_t r : ranks) {
    ASSIGN_OR_RETURN(const Shard shard, ReadShard(manifest_path, manifest, r, /*verify=*/false));
    RETURN_IF_ERROR(Overlay(shard, /*own=*/r == rank, &base));
  }
  return base;
}

namespace {

// A slice of a tensor in the shard read from `path`.
struct Slice {
  uint64_t begin = 0;
  const std::vector<float>* values = nullptr;
  const std::string* path = nullptr;
};

// Every shard's tensors by name: rank 0's whole ones and everyone's slices, in first-seen order.
struct Pieces {
  std::vector<std::string> seen;
  std::map<std::string, const CheckpointTensor*> whole;
  std::map<std::string, std::vector<Slice>> slices;
  std::map<std::string, std::vector<uint64_t>> layout_shapes;  // RecordModelLayout's
};

// RecordModelLayout's record in rank 0's shard, if any: the parameters' names in model order
// (returned) and their shapes (into `shapes`). Errors: DATA_LOSS for an unreadable shape.
absl::StatusOr<std::vector<std::string>> ReadModelLayout(
    const Shard& shard0, std::map<std::string, std::vector<uint64_t>>* shapes) {
  const std::string names = Attribute(shard0.data, kLayoutNamesKey);
  if (names.empty()) return std::vector<std::string>();
  std::vector<std::string> order = absl::StrSplit(names, ',');
  for (const std::string& name : order) {
    std::vector<uint64_t> shape;
    for (absl::string_view d : absl::StrSplit(Attribute(shard0.data, kLayoutShapeKey + name),
                                              'x', absl::SkipEmpty())) {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(d, &v)) shape.clear();
      shape.push_back(v);
    }
    if (shape.empty()) {
      return absl::DataLossError(absl::StrCat("shard ", shard0.path, " records no shape for ",
                                              name, " in its model layout"));
    }
    (*shapes)[name] = std::move(shape);
  }
  return order;
}

absl::StatusOr<Pieces> Collect(const std::vector<Shard>& shards) {
  Pieces pieces;
  for (size_t r = 0; r < shards.size(); ++r) {
    for (const CheckpointTensor& t : shards[r].data.tensors) {
      ASSIGN_OR_RETURN(const std::optional<uint64_t> begin, SliceBegin(shards[r], t));
      if (pieces.whole.count(t.name) == 0 && pieces.slices.count(t.name) == 0) {
        pieces.seen.push_back(t.name);
      }
      if (begin.has_value()) {
        pieces.slices[t.name].push_back({*begin, &t.data, &shards[r].path});
      } else if (r == 0) {
        pieces.whole[t.name] = &t;
      } else {
        return absl::DataLossError(absl::StrCat("shard ", shards[r].path, " holds ", t.name,
                                                " whole; only rank 0's shard holds whole tensors"));
      }
    }
  }
  // fsdp: no rank holds a parameter whole; the layout gives the model's order and shapes.
  ASSIGN_OR_RETURN(const std::vector<std::string> layout,
                   ReadModelLayout(shards[0], &pieces.layout_shapes));
  if (!layout.empty()) {
    std::vector<std::string> seen;
    for (const std::string& name : layout) {
      if (pieces.whole.count(name) == 0 && pieces.slices.count(name) == 0) {
        return absl::DataLossError(absl::StrCat("sharded checkpoint: no shard holds any element of ",
                                                name, " (named by ", shards[0].path,
                                                "'s model layout)"));
      }
      seen.push_back(name);
    }
    for (const std::string& name : pieces.seen) {
      if (pieces.layout_shapes.count(name) == 0) seen.push_back(name);
    }
    pieces.seen = std::move(seen);
  }
  return pieces;
}

// The end of the union of `slices`.
uint64_t SlicesEnd(const std::vector<Slice>& slices) {
  uint64_t end = 0;
  for (const Slice& s : slices) end = std::max<uint64_t>(end, s.begin + s.values->size());
  return end;
}

// The consolidated shape of the tensor `name`: rank 0's whole tensor's; for a momentum buffer,
// its parameter's (whole, or [end of its slices]); otherwise [end of its own slices].
std::vector<uint64_t> ShapeOf(const Pieces& pieces, const std::string& name) {
  if (const auto it = pieces.whole.find(name); it != pieces.whole.end()) return it->second->shape;
  if (const auto it = pieces.layout_shapes.find(name); it != pieces.layout_shapes.end()) {
    return it->second;
  }
  absl::string_view parameter = name;
  if (absl::ConsumeSuffix(&parameter, kMomentumSuffix)) {
    const std::string p(parameter);
    if (const auto it = pieces.whole.find(p); it != pieces.whole.end()) return it->second->shape;
    if (const auto it = pieces.layout_shapes.find(p); it != pieces.layout_shapes.end()) {
      return it->second;
    }
    if (const auto it = pieces.slices.find(p); it != pieces.slices.end()) {
      return {SlicesEnd(it->second)};
    }
  }
  return {SlicesEnd(pieces.slices.at(name))};
}

std::string Range(uint64_t begin, uint64_t end) { return absl::StrCat("[", begin, ", ", end, ")"); }

// Checks that `slices` of `name` (sorted by begin) cover its `size` elements exactly once;
// before anything is allocated, so a slice far past the end costs nothing.
absl::Status CheckTiling(const std::string& name, const std::vector<Slice>& slices,
                         uint64_t size) {
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const Slice& s : slices) {
    if (s.values->empty() && s.begin <= size) continue;  // holds nothing
    const uint64_t end = s.begin + s.values->size();
    const std::string where = absl::StrCat("shard ", *s.path, ": slice ", name, " ",
                                           Range(s.begin, end));
    if (end > size) {
      return absl::DataLossError(
          absl::StrCat(where, " runs past the end of ", name, " (", size, " elements)"));
    }
    if (s.begin < covered) {
      return absl::DataLossError(absl::StrCat(where, " overlaps elements ",
                                              Range(s.begin, std::min(covered, end)),
                                              " held by shard ", *previous));
    }
    if (s.begin > covered) {
      return absl::DataLossError(absl::StrCat(where, " leaves elements ", Range(covered, s.begin),
                                              " of ", name, " in no shard"));
    }
    covered = end;
    previous = s.path;
  }
  if (covered < size) {
    const std::string& last = previous != nullptr ? *previous : *slices.back().path;
    return absl::DataLossError(absl::StrCat("shard ", last, ": ", name, "'s last slice ends at ",
                                            covered, ", elements ", Range(covered, size), " of ",
                                            size, " are in no shard"));
  }
  return absl::OkStatus();
}

// The whole tensor `name`: rank 0's, or its slices laid side by side (covering every element,
// even where rank 0 also holds it whole: that one gives the shape only).
absl::StatusOr<CheckpointTensor> Consolidated(const Pieces& pieces, const std::string& name) {
  CheckpointTensor t;
  t.name = name;
  t.shape = ShapeOf(pieces, name);
  const auto slices = pieces.slices.find(name);
  if (slices == pieces.slices.end()) {
    t.data = pieces.whole.at(name)->data;
    return t;
  }
  std::vector<Slice> sorted = slices->second;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Slice& a, const Slice& b) { return a.begin < b.begin; });
  uint64_t elements = 1;
  for (uint64_t d : t.shape) elements *= d;
  RETURN_IF_ERROR(CheckTiling(name, sorted, elements));
  t.data.resize(elements);
  for (const Slice& s : sorted) {
    std::copy(s.values->begin(), s.values->end(), t.data.begin() + s.begin);
  }
  return t;
}

// CaptureTrainingState's order: `seen` as it is, except that the momentum buffers of tensors
// there move, in their parameters' order, to right after the last parameter that has one.
std::vector<std::string> ConsolidatedOrder(const std::vector<std::string>& seen) {
  const std::set<std::string> names(seen.begin(), seen.end());
  std::vector<std::string> order;
  std::vector<std::string> momentum;
  size_t momentum_at = 0;
  for (const std::string& name : seen) {
    absl::string_view parameter = name;
    if (absl::ConsumeSuffix(&parameter, kMomentumSuffix) &&
        names.count(std::string(parameter)) > 0) {
      continue;
    }
    order.push_back(name);
    if (names.count(name + kMomentumSuffix) > 0) {
      momentum.push_back(name + kMomentumSuffix);
      momentum_at = order.size();
    }
  }
  order.insert(order.begin() + momentum_at, momentum.begin(), momentum.end());
  return order;
}

// Rank 0's attributes but the sharded format's own.
std::map<std::string, std::string> ModelAttributes(const CheckpointData& shard0) {
  std::map<std::string, std::string> attributes;
  for (const auto& [key, value] : shard0.attributes) {
    if (absl::StartsWith(key, kSliceKey) || absl::StartsWith(key, kShardKey) ||
        absl::StartsWith(key, "layout.") || key == kFormatKey) {
      continue;
    }
    attributes[key] = value;
  }
  return attributes;
}

}  // namespace

absl::StatusOr<CheckpointData> ConsolidateShards(const std::string& manifest_path,
                                                 const CheckpointData& manifest) {
  ASSIGN_OR_RETURN(const uint32_t world, WorldSize(manifest, manifest_path));
  std::vector<Shard> shards;
  for (uint32_t r = 0; r < world; ++r) {
    ASSIGN_OR_RETURN(Shard shard, ReadShard(manifest_path, manifest, r, /*verify=*/true));
    shards.push_back(std::move(shard));
  }
  ASSIGN_OR_RETURN(const Pieces pieces, Collect(shards));
  CheckpointData data;
  data.step = manifest.step;
  data.epoch = manifest.epoch;
  data.spec_fingerprint = manifest.spec_fingerprint;
  data.attributes = ModelAttributes(shards[0].data);
  for (const std::string& name : ConsolidatedOrder(pieces.seen)) {
    ASSIGN_OR_RETURN(CheckpointTensor t, Consolidated(pieces, name));
    data.tensors.push_back(std::move(t));
  }
  return data;
}

}  // namespace ringleader
