// The formulas of memory_plan.h, one function per quantity.
#include "plan/memory_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_spec.h"
#include "common/spec_kinds.h"
#include "common/status_macros.h"
#include "plan/fsdp_plan.h"
#include "plan/zero2_plan.h"

namespace ringleader {
namespace {

constexpr uint64_t kFloatBytes = 4;
constexpr uint64_t kBf16Bytes = 2;

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// S_r: rank r's elements of T under shard_plan.h's split.
uint64_t ShardOf(uint64_t total, uint32_t world_size, uint32_t rank) {
  return total * (uint64_t{rank} + 1) / world_size - total * rank / world_size;
}

// The MLP's per-parameter trainable counts in registration order (0 for a frozen one), as the
// rank's ParameterPlan gives them to PlanZero2.
std::vector<size_t> TrainableCounts(const v1::ModelSpec& model) {
  std::vector<size_t> counts;
  const std::set<std::string> frozen(model.frozen_parameters().begin(),
                                     model.frozen_parameters().end());
  for (int layer = 1; layer < model.layers_size(); ++layer) {
    const size_t in = model.layers(layer - 1);
    const size_t out = model.layers(layer);
    counts.push_back(frozen.count(absl::StrCat("fc", layer, ".weight")) ? 0 : in * out);
    counts.push_back(frozen.count(absl::StrCat("fc", layer, ".bias")) ? 0 : out);
  }
  return counts;
}

// Whether `strategy` runs for `spec`'s settings, and why not in a few words. (ddp and zero1 run
// whatever the built-in trainer runs, on gloo and nccl alike.)
std::string Unavailable(const v1::JobSpec& spec, Strategy strategy) {
  if (!TraitsOf(strategy).shards_gradients) return "";
  v1::JobSpec sharded = spec;
  sharded.set_strategy(Name(strategy));
  const absl::Status status = ValidateStrategyCombination(sharded);
  if (status.ok()) return "";
  const std::string message(status.message());
  return absl::StrCat("not with ", message.substr(0, message.find(':')));
}

}  // namespace

const std::vector<std::string>& PlannedStrategies() {
  static const auto* strategies = [] {
    auto* names = new std::vector<std::string>;
    for (Strategy strategy : AllStrategies()) names->push_back(Name(strategy));
    return names;
  }();
  return *strategies;
}

ModelElementCounts CountModelElements(const v1::ModelSpec& model) {
  ModelElementCounts counts;
  if (model.kind() != "mlp" || model.layers_size() < 2) return counts;
  const std::set<std::string> frozen(model.frozen_parameters().begin(),
                                     model.frozen_parameters().end());
  for (int layer = 1; layer < model.layers_size(); ++layer) {
    const uint64_t in = model.layers(layer - 1);
    const uint64_t out = model.layers(layer);
    const uint64_t weight = in * out;
    counts.parameters += weight + out;
    counts.largest_layer = std::max(counts.largest_layer, weight + out);
    // ModelParameterNames' names: fc<layer>.weight, fc<layer>.bias.
    if (frozen.count(absl::StrCat("fc", layer, ".weight")) == 0) counts.trainable += weight;
    if (frozen.count(absl::StrCat("fc", layer, ".bias")) == 0) counts.trainable += out;
  }
  return counts;
}

absl::StatusOr<v1::RankMemory> PredictRankMemory(const v1::JobSpec& spec,
                                                 const std::string& strategy_name,
                                                 uint32_t world_size, uint32_t rank) {
  ASSIGN_OR_RETURN(const Strategy strategy, ParseStrategy(strategy_name));
  const StrategyTraits& traits = TraitsOf(strategy);
  if (world_size == 0) {
    return absl::InvalidArgumentError("world_size: must be at least 1, got 0");
  }
  if (rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: must be below world_size ", world_size, ", got ", rank));
  }
  if (!spec.command().empty()) {
    return absl::InvalidArgumentError(
        "command: a command job runs your own program, whose memory ringleader cannot predict; "
        "drop command to plan the built-in trainer");
  }
  if (spec.model().kind() != "mlp") {
    return absl::InvalidArgumentError(absl::StrCat("model.kind: unknown model kind '",
                                                   spec.model().kind(), "' (expected mlp)"));
  }
  const ModelElementCounts counts = CountModelElements(spec.model());
  const uint64_t p = counts.parameters;
  const uint64_t t = counts.trainable;
  const uint64_t n = world_size;
  const uint64_t c = CeilDiv(t, n);
  const uint64_t shard = ShardOf(t, world_size, rank);
  const bool momentum = spec.optimizer().momentum() > 0;
  const bool bf16 = CommDtypeOf(spec) == Precision::kBf16;
  // zero2 / fsdp: a second gradient shard receives each later micro-batch
  // (worker/sync/zero2_reducer.h).
  const bool accumulating = spec.sync().gradient_accumulation_steps() > 1;

  uint64_t parameters = kFloatBytes * p;
  uint64_t gradients = 0;
  uint64_t optimizer = 0;
  uint64_t comm = 0;
  if (!traits.shards_gradients) {  // ddp, zero1: the reducer's full gradient arena
    gradients = kFloatBytes * (t + 1);  // the reducer's arena: gradients + readiness float
    if (bf16) comm += kBf16Bytes * (t + 1);
    if (!traits.shards_optimizer_state) {  // ddp
      optimizer = momentum ? kFloatBytes * t : 0;
    } else {  // zero1
      optimizer = momentum ? kFloatBytes * shard : 0;
      // The gather's send buffer G + receive buffer N x G, G = one chunk.
      comm += kFloatBytes * std::min<uint64_t>(c, kZero1GatherChunkElements) * (n + 1);
    }
  } else if (!traits.shards_parameters) {  // zero2
    // The zero2 reducer's gradient shard and bucket pool, zero1's sharded optimizer and
    // parameter gather on the bucket-aligned shards (plan/zero2_plan.h).
    absl::StatusOr<Zero2Plan> z = PlanZero2(
        TrainableCounts(spec.model()), world_size,
        Zero2LayoutOptions(spec.sync().first_bucket_mb(), spec.sync().bucket_cap_mb()));
    if (z.ok()) {
      gradients = kFloatBytes * (z->shard_elements * (accumulating ? 2 : 1) +
                                 z->pool_buffers * z->pool_buffer_elements);
      optimizer = momentum ? kFloatBytes * z->shards.owned_count(rank) : 0;
      comm = kFloatBytes * std::min<uint64_t>(z->shards.capacity, kZero1GatherChunkElements) *
             (n + 1);
      if (bf16) comm += kBf16Bytes * (z->shard_elements + z->pool_buffers * z->pool_buffer_elements);
    }  // else every parameter is frozen: nothing to shard
  } else {  // fsdp: zero2's gradients and optimizer, the parameters sharded alike
    // Every parameter counts, frozen ones too (sharded with their buckets, reduced as zeros);
    // only the trainable ones have momentum.
    std::vector<size_t> all;
    for (int layer = 1; layer < spec.model().layers_size(); ++layer) {
      all.push_back(size_t{spec.model().layers(layer - 1)} * spec.model().layers(layer));
      all.push_back(spec.model().layers(layer));
    }
    absl::StatusOr<FsdpPlan> f = PlanFsdp(
        all, MlpLayerParameters(all.size() / 2), world_size,
        Zero2LayoutOptions(spec.sync().first_bucket_mb(), spec.sync().bucket_cap_mb()));
    if (f.ok()) {
      const Zero2Plan& z = f->zero2;
      parameters = kFloatBytes * (f->shard_elements() + f->staging_elements);
      gradients = kFloatBytes * (z.shard_elements * (accumulating ? 2 : 1) +
                                 z.pool_buffers * z.pool_buffer_elements);
      const std::vector<size_t> trainable = TrainableCounts(spec.model());
      uint64_t stepped = 0;  // this rank's owned elements of the trainable parameters
      for (size_t i = 0; i < trainable.size(); ++i) {
        if (trainable[i] > 0) stepped += z.shards.owned[rank][i].size();
      }
      optimizer = momentum ? kFloatBytes * stepped : 0;
      comm = 0;  // the gathers send from the shard and receive into the staging
      if (bf16) comm += kBf16Bytes * (z.shard_elements + z.pool_buffers * z.pool_buffer_elements);
    }
  }
  v1::RankMemory memory;
  memory.set_parameter_bytes(parameters);
  memory.set_gradient_bytes(gradients);
  memory.set_optimizer_bytes(optimizer);
  memory.set_comm_buffer_bytes(comm);
  memory.set_total_bytes(parameters + gradients + optimizer + comm);
  return memory;
}

absl::StatusOr<v1::MemoryPlan> PlanMemory(const v1::JobSpec& spec, uint32_t world_size) {
  v1::MemoryPlan plan;
  plan.set_world_size(world_size);
  const ModelElementCounts counts = CountModelElements(spec.model());
  plan.set_parameters(counts.parameters);
  plan.set_trainable_parameters(counts.trainable);
  plan.set_spec_strategy(spec.strategy());
  uint64_t ddp_total = 0;
  for (const Strategy strategy : AllStrategies()) {
    v1::StrategyMemory* row = plan.add_strategies();
    row->set_strategy(Name(strategy));
    // The rank that holds the most (shards differ by at most one element).
    for (uint32_t rank = 0; rank < world_size || rank == 0; ++rank) {
      absl::StatusOr<v1::RankMemory> memory =
          PredictRankMemory(spec, Name(strategy), world_size, rank);
      if (!memory.ok()) return memory.status();
      if (rank == 0 || memory->total_bytes() > row->memory().total_bytes()) {
        *row->mutable_memory() = *memory;
      }
    }
    if (strategy == Strategy::kDdp) ddp_total = row->memory().total_bytes();
    row->set_vs_ddp(ddp_total == 0 ? 0
                                   : static_cast<double>(row->memory().total_bytes()) / ddp_total);
    const std::string why_not = Unavailable(spec, strategy);
    row->set_available(why_not.empty());
    row->set_note(why_not);
  }
  return plan;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit + 1 < 4) {
    value /= 1024;
    ++unit;
  }
  // Rounding may carry into the next decade ("9.996" -> "10.00"): pick the precision after it.
  const int decimals = value < 9.995 ? 2 : value < 99.95 ? 1 : 0;
  return absl::StrFormat("%.*f %s", decimals, value, kUnits[unit]);
}

}  // namespace ringleader
