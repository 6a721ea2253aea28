#include "worker/sync/shard_sync.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status Annotate(const absl::Status& s, const char* who) {
  if (s.ok()) return s;
  return WithPrefix(s, absl::StrCat(who, ": "));
}

absl::Status CheckPlan(const Collective* comm, const ShardPlan& plan, size_t parameters,
                       const char* who) {
  if (comm == nullptr) return absl::InvalidArgumentError(absl::StrCat(who, ": comm is null"));
  if (plan.world_size != static_cast<size_t>(comm->world_size()) ||
      plan.owned.size() != plan.world_size || plan.counts.size() != parameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": the shard plan is for ", plan.world_size, " ranks and ", plan.counts.size(),
        " parameters, the call has ", comm->world_size(), " ranks and ", parameters));
  }
  return absl::OkStatus();
}

// The pieces of rank `r`'s shard at shard positions [begin, end): fn(parameter, its first
// element, the piece's offset from `begin`, elements) for each, in order.
template <typename Fn>
absl::Status ForEachPiece(const ShardPlan& plan, size_t r, size_t begin, size_t end, Fn fn,
                          const char* who) {
  size_t position = 0;  // shard position of the current parameter's first owned element
  for (size_t i = 0; i < plan.owned[r].size() && position < end; ++i) {
    const ElementRange& range = plan.owned[r][i];
    const size_t lo = std::max(position, begin);
    const size_t hi = std::min(position + range.size(), end);
    if (lo < hi) {
      RETURN_IF_ERROR(Annotate(fn(i, range.begin + (lo - position), lo - begin, hi - lo), who));
    }
    position += range.size();
  }
  return absl::OkStatus();
}

}  // namespace

size_t GatherChunkElements(const ShardPlan& plan) {
  return std::min(plan.capacity, kGatherChunkElements);
}

absl::Status AllGatherParameterShards(Collective* comm, const ShardPlan& plan,
                                      const std::vector<float*>& params,
                                      const ShardSyncOptions& opts) {
  static constexpr char kWho[] = "parameter-shard gather";
  RETURN_IF_ERROR(CheckPlan(comm, plan, params.size(), kWho));
  if (plan.capacity == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, kWho));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  const size_t rank = static_cast<size_t>(comm->rank());
  const size_t world = plan.world_size;
  const size_t chunk = GatherChunkElements(plan);

  ASSIGN_OR_RETURN(TensorBuffer<float> mine, TensorBuffer<float>::Allocate(memory, chunk));
  ASSIGN_OR_RETURN(TensorBuffer<float> all, TensorBuffer<float>::Allocate(memory, chunk * world));
  if (opts.staging_bytes != nullptr) *opts.staging_bytes = mine.bytes() + all.bytes();
  CollectiveOptions copts;
  copts.timeout = opts.timeout;
  copts.bucket = kTagShardGather;
  // Chunk by chunk of the shard positions [begin, begin + chunk): every rank the same chunks.
  for (size_t begin = 0; begin < plan.capacity; begin += chunk) {
    const size_t end = std::min(plan.capacity, begin + chunk);
    size_t packed = 0;
    RETURN_IF_ERROR(ForEachPiece(plan, rank, begin, end, [&](size_t i, size_t element, size_t at,
                                                             size_t count) {
      packed = at + count;
      return memory->Copy(mine.data() + at, params[i] + element, count * sizeof(float));
    }, kWho));
    // The padding goes over the wire too: zeros, so the bytes sent are deterministic.
    if (packed < chunk) {
      RETURN_IF_ERROR(
          Annotate(memory->Zero(mine.data() + packed, (chunk - packed) * sizeof(float)), kWho));
    }
    if (opts.ledger != nullptr) {
      opts.ledger->Record(CollectiveKind::kAllGather, kTagShardGather, chunk, DataType::kFloat32);
    }
    RETURN_IF_ERROR(Annotate(
        comm->AllGather(TensorView{mine.data(), chunk, DataType::kFloat32},
                        TensorView{all.data(), chunk * world, DataType::kFloat32}, copts)
            ->Wait(),
        kWho));
    for (size_t r = 0; r < world; ++r) {
      if (r == rank) continue;  // this rank's own elements are already in place
      const float* from = all.data() + r * chunk;
      RETURN_IF_ERROR(ForEachPiece(plan, r, begin, end, [&](size_t i, size_t element, size_t at,
                                                            size_t count) {
        return memory->Copy(params[i] + element, from + at, count * sizeof(float));
      }, kWho));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> AllGatherMomentumShards(
    Collective* comm, const ShardPlan& plan, const std::vector<std::vector<float>>& local,
    const ShardSyncOptions& opts) {
  static constexpr char kWho[] = "momentum-shard gather";
  RETURN_IF_ERROR(CheckPlan(comm, plan, local.size(), kWho));
  const size_t n = local.size();
  const size_t rank = static_cast<size_t>(comm->rank());
  const size_t world = plan.world_size;
  for (size_t i = 0; i < n; ++i) {
    if (!local[i].empty() && local[i].size() != plan.owned[rank][i].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kWho, ": the momentum buffer of parameter ", i, " has ", local[i].size(),
          " elements, this rank's shard of it ", plan.owned[rank][i].size()));
    }
  }
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, kWho));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  // Per rank: its shard (capacity floats, zero padded), then 1.0f per parameter it holds a
  // buffer of (0.0f otherwise).
  const size_t stride = plan.capacity + n;
  ASSIGN_OR_RETURN(StagedBytes mine, StagedBytes::Create(memory, stride * sizeof(float)));
  ASSIGN_OR_RETURN(StagedBytes all, StagedBytes::Create(memory, stride * world * sizeof(float)));
  std::vector<float> packed(stride, 0.0f);
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t size = plan.owned[rank][i].size();
    if (size == 0) continue;
    if (!local[i].empty()) {
      std::memcpy(packed.data() + offset, local[i].data(), size * sizeof(float));
      packed[plan.capacity + i] = 1.0f;
    }
    offset += size;
  }
  std::memcpy(mine.host(), packed.data(), stride * sizeof(float));
  RETURN_IF_ERROR(Annotate(mine.Upload(), kWho));
  if (opts.ledger != nullptr) {
    opts.ledger->Record(CollectiveKind::kAllGather, kTagMomentumGather, stride,
                        DataType::kFloat32);
  }
  CollectiveOptions copts;
  copts.timeout = opts.timeout;
  copts.bucket = kTagMomentumGather;
  absl::Status gathered =
      comm->AllGather(TensorView{mine.wire(), stride, DataType::kFloat32},
                      TensorView{all.wire(), stride * world, DataType::kFloat32}, copts)
          ->Wait();
  if (gathered.ok()) gathered = all.Download();
  RETURN_IF_ERROR(Annotate(gathered, kWho));
  std::vector<float> values(stride * world);
  std::memcpy(values.data(), all.host(), values.size() * sizeof(float));

  std::vector<std::vector<float>> full(n);
  for (size_t r = 0; r < world; ++r) {
    const float* base = values.data() + r * stride;
    offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const ElementRange& range = plan.owned[r][i];
      if (range.empty()) continue;
      if (base[plan.capacity + i] != 0.0f) {
        if (full[i].empty()) full[i].assign(plan.counts[i], 0.0f);
        std::memcpy(full[i].data() + range.begin, base + offset, range.size() * sizeof(float));
      }
      offset += range.size();
    }
  }
  return full;
}

}  // namespace ringleader
