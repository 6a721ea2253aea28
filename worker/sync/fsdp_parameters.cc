#include "worker/sync/fsdp_parameters.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<FsdpParameters>> FsdpParameters::Create(
    Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
    FsdpParametersOptions opts) {
  if (comm == nullptr) return absl::InvalidArgumentError("fsdp parameters: comm is null");
  if (opts.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("fsdp parameters: the gather timeout must be > 0");
  }
  const ShardPlan& shards = plan.zero2.shards;
  bool same = plan.zero2.world_size == static_cast<size_t>(comm->world_size()) &&
              shards.counts.size() == params.size();
  for (size_t i = 0; same && i < params.size(); ++i) same = shards.counts[i] == params[i].count;
  if (!same) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp parameters: the plan is for ", plan.zero2.world_size, " ranks and ",
        shards.counts.size(), " parameters, the call has ", comm->world_size(), " ranks and ",
        params.size(), " parameters (or other counts)"));
  }
  const Collective* channel = opts.gather_channel;
  if (channel != nullptr &&
      (channel->rank() != comm->rank() || channel->world_size() != comm->world_size() ||
       channel->memory_kind() != comm->memory_kind())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp parameters: the gather channel is rank ", channel->rank(), " of ",
        channel->world_size(), ", the collective rank ", comm->rank(), " of ",
        comm->world_size(), " (or another memory kind): pass comm->side_channel()"));
  }
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "fsdp parameters"));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  std::unique_ptr<FsdpParameters> made(
      new FsdpParameters(comm, std::move(params), std::move(plan), opts, memory));
  ASSIGN_OR_RETURN(made->shard_,
                   TensorBuffer<float>::Allocate(memory, made->plan_.shard_elements()));
  if (made->shard_.size() > 0) {
    RETURN_IF_ERROR(memory->Zero(made->shard_.data(), made->shard_.bytes()));
  }
  // Every gather writes all N x s_b floats of its place before anyone reads them: not zeroed.
  ASSIGN_OR_RETURN(made->staging_,
                   TensorBuffer<float>::Allocate(memory, made->plan_.staging_elements));
  return made;
}

FsdpParameters::FsdpParameters(Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
                               FsdpParametersOptions opts, TensorMemory* memory)
    : comm_(comm),
      gather_comm_(opts.gather_channel != nullptr ? opts.gather_channel : comm),
      params_(std::move(params)),
      plan_(std::move(plan)),
      opts_(opts),
      memory_(memory),
      rank_(static_cast<size_t>(comm->rank())) {}

FsdpParameters::~FsdpParameters() {
  // The buffers are freed after this body: no gather may still be writing them.
  for (const Issued& g : issued_) g.gather->Wait().IgnoreError();  // reported by Release
}

absl::Status FsdpParameters::LoadOwned(const std::vector<const float*>& full) {
  if (full.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("fsdp parameters: ", full.size(),
                                                   " parameters given, the model has ",
                                                   params_.size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (full[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("fsdp parameters: no values for ", params_[i].name));
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const ElementRange& owned = plan_.zero2.shards.owned[rank_][i];
    if (owned.empty()) continue;
    RETURN_IF_ERROR(memory_->Copy(owned_parameter(i), full[i] + owned.begin,
                                  owned.size() * sizeof(float)));
  }
  ready_ = nullptr;  // the shard changed: the next gather waits for these copies
  return absl::OkStatus();
}

float* FsdpParameters::owned_parameter(size_t i) {
  if (plan_.zero2.shards.owned[rank_][i].empty()) return nullptr;
  return shard_.data() + plan_.zero2.ShardPosition(rank_, i);
}

std::vector<size_t> FsdpParameters::held_buckets() const {
  std::vector<size_t> held;
  for (const auto& [b, h] : held_) held.push_back(b);
  return held;
}

void FsdpParameters::NoteHeld() {
  size_t held = 0;
  for (const auto& [b, h] : held_) held += plan_.gathered_elements(b);
  staging_peak_ = std::max(staging_peak_, held);
}

size_t FsdpParameters::parameter_bytes() const {
  return sizeof(float) * (plan_.shard_elements() + plan_.staging_elements);
}

absl::Status FsdpParameters::GatherError(const absl::Status& s, size_t b, int layer) const {
  return WithPrefix(s, absl::StrCat("fsdp parameter gather of bucket ", b,
                                    layer >= 0 ? absl::StrCat(" (layer ", layer, ")") : "",
                                    ": "));
}

void FsdpParameters::Gather(size_t b, int layer, std::shared_ptr<const ComputeMark> after) {
  const Zero2Plan& z = plan_.zero2;
  const size_t s = z.slice[b];
  if (opts_.ledger != nullptr) {
    opts_.ledger->Record(CollectiveKind::kAllGather, static_cast<int32_t>(b), s,
                         DataType::kFloat32);
  }
  CollectiveOptions options;
  options.timeout = opts_.timeout;
  options.bucket = static_cast<int>(b);
  options.after = std::move(after);
  ++gathers_;
  std::shared_ptr<Work> work = gather_comm_->AllGather(
      TensorView{shard_.data() + z.shard_offset[b], s, DataType::kFloat32},
      TensorView{staging_.data() + plan_.staging_offset[b], plan_.gathered_elements(b),
                 DataType::kFloat32},
      options);
  held_[b] = Held{work, false, static_cast<size_t>(std::max(layer, 0))};
  issued_.push_back(Issued{std::move(work), b, layer});
  NoteHeld();
}

absl::Status FsdpParameters::Drop(size_t b) {
  auto it = held_.find(b);
  if (it == held_.end()) return absl::OkStatus();
  absl::Status s;
  if (!it->second.ordered) {
    s = it->second.gather->OrderCompute();
    if (!s.ok()) s = GatherError(s, b, static_cast<int>(it->second.layer));
  }
  held_.erase(it);
  freed_since_mark_ = true;
  return s;
}

absl::StatusOr<std::shared_ptr<const ComputeMark>> FsdpParameters::ReadyMark() {
  if (ready_ == nullptr || freed_since_mark_) {
    absl::StatusOr<std::shared_ptr<const ComputeMark>> mark = gather_comm_->MarkCompute();
    if (!mark.ok()) return WithPrefix(mark.status(), "fsdp parameters: marking the compute: ");
    ready_ = *std::move(mark);
    freed_since_mark_ = false;
  }
  return ready_;
}

const float* FsdpParameters::InBucket(size_t i) const {
  const BucketLayout& layout = plan_.zero2.layout;
  const size_t b = layout.param_bucket[i];
  return staging_.data() + plan_.staging_offset[b] +
         (layout.param_offset[i] - layout.buckets[b].offset);
}

absl::StatusOr<LayerParameters> FsdpParameters::Acquire(size_t k) {
  if (k >= plan_.layer_params.size() || plan_.layer_params[k].size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp parameters: layer ", k, " is not a layer of weight and bias (the plan has ",
        plan_.layer_params.size(), " layers)"));
  }
  const std::vector<size_t>& needed = plan_.layer_buckets[k];
  // The plan's request, or (off the pass) layer k's buckets alone.
  std::vector<size_t> release;
  std::vector<size_t> gather;
  if (!off_schedule_ && next_request_ < plan_.pass.size() &&
      plan_.pass[next_request_].layer == k) {
    release = plan_.pass[next_request_].release;
    gather = plan_.pass[next_request_].gather;
    ++next_request_;
  } else {
    off_schedule_ = true;
    for (const auto& [b, h] : held_) {
      if (std::find(needed.begin(), needed.end(), b) == needed.end()) release.push_back(b);
    }
    for (size_t b : needed) {
      if (held_.count(b) == 0) gather.push_back(b);
    }
  }
  absl::Status dropped;
  for (size_t b : release) {
    const absl::Status s = Drop(b);
    if (dropped.ok()) dropped = s;
  }
  RETURN_IF_ERROR(dropped);
  if (!gather.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const ComputeMark> after, ReadyMark());
    for (size_t b : gather) {
      const bool mine = std::find(needed.begin(), needed.end(), b) != needed.end();
      // A prefetched bucket is tagged with the next layer for messages: the first of the
      // pass's later requests that needs it.
      size_t layer = k;
      if (!mine) {
        for (size_t j = next_request_; j < plan_.pass.size(); ++j) {
          const std::vector<size_t>& uses = plan_.layer_buckets[plan_.pass[j].layer];
          if (std::find(uses.begin(), uses.end(), b) != uses.end()) {
            layer = plan_.pass[j].layer;
            break;
          }
        }
      }
      Gather(b, static_cast<int>(layer), after);
    }
  }
  // Layer k's compute, issued by the caller after this returns, waits for its gathers.
  for (size_t b : needed) {
    Held& h = held_.at(b);
    if (h.ordered) continue;
    const absl::Status s = h.gather->OrderCompute();
    if (!s.ok()) return GatherError(s, b, static_cast<int>(h.layer));
    h.ordered = true;
  }
  return LayerParameters{InBucket(plan_.layer_params[k][0]), InBucket(plan_.layer_params[k][1])};
}

absl::Status FsdpParameters::Release() {
  absl::Status first;
  for (const Issued& g : issued_) {
    const absl::Status s = g.gather->Wait();
    if (!s.ok() && first.ok()) first = GatherError(s, g.bucket, g.layer);
  }
  issued_.clear();
  held_.clear();
  ready_ = nullptr;  // the next pass may come after an optimizer step: it takes a new mark
  freed_since_mark_ = false;
  next_request_ = 0;
  off_schedule_ = false;
  return first;
}

absl::Status FsdpParameters::ForEachGatheredBucket(
    const std::function<absl::Status(size_t b)>& fn) {
  RETURN_IF_ERROR(Release());
  for (size_t b = 0; b < plan_.zero2.layout.buckets.size(); ++b) {
    // After everything the caller issued (null mark): rare, and the caller may just have
    // written the shard.
    Gather(b, -1, nullptr);
    RETURN_IF_ERROR(Release());  // waits for the gather
    held_[b] = Held{nullptr, true, 0};  // its staging, valid until the next Release
    const absl::Status s = fn(b);
    held_.clear();
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> FsdpParameters::GatherAll() {
  std::vector<std::vector<float>> full(params_.size());
  RETURN_IF_ERROR(ForEachGatheredBucket([&](size_t b) -> absl::Status {
    for (size_t i : plan_.zero2.layout.buckets[b].params) {
      full[i].resize(params_[i].count);
      RETURN_IF_ERROR(
          memory_->CopyToHost(full[i].data(), InBucket(i), params_[i].count * sizeof(float)));
    }
    return absl::OkStatus();
  }));
  return full;
}

absl::Status FsdpParameters::GatherAllInto(const std::vector<float*>& full) {
  if (full.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("fsdp parameters: ", full.size(),
                                                   " destinations given, the model has ",
                                                   params_.size(), " parameters"));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (full[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("fsdp parameters: no destination for ", params_[i].name));
    }
  }
  return ForEachGatheredBucket([&](size_t b) -> absl::Status {
    for (size_t i : plan_.zero2.layout.buckets[b].params) {
      RETURN_IF_ERROR(memory_->Copy(full[i], InBucket(i), params_[i].count * sizeof(float)));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<DriftResult> FsdpParameters::MeasureGatheredDrift(const DriftOptions& drift) {
  if (drift.memory != nullptr && drift.memory != memory_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp parameters: the drift check runs where the gathered parameters are (",
        memory_->name(), "), not in ", drift.memory->name()));
  }
  DriftOptions options = drift;
  options.memory = memory_;
  DriftResult result;
  result.per_parameter.assign(params_.size(), 0.0);
  bool first = true;
  const BucketLayout& layout = plan_.zero2.layout;
  RETURN_IF_ERROR(ForEachGatheredBucket([&](size_t b) -> absl::Status {
    std::vector<ParameterInfo> infos;
    std::vector<const float*> ptrs;
    for (size_t i : layout.buckets[b].params) {
      infos.push_back(params_[i]);
      ptrs.push_back(InBucket(i));
    }
    ASSIGN_OR_RETURN(const DriftResult bucket, MeasureDrift(comm_, infos, ptrs, options));
    for (size_t j = 0; j < infos.size(); ++j) {
      result.per_parameter[layout.buckets[b].params[j]] = bucket.per_parameter[j];
    }
    // NaN is the worst (drift.h): it wins over any number, and the first NaN stays.
    const bool nan_now = std::isnan(bucket.max_drift);
    const bool nan_before = !first && std::isnan(result.max_drift);
    const bool worse = first || (!nan_before && (nan_now || bucket.max_drift > result.max_drift));
    if (worse) {
      result.max_drift = bucket.max_drift;
      result.worst_parameter = bucket.worst_parameter;
      result.worst_rank = bucket.worst_rank;
    }
    if (first || std::isnan(bucket.local_max_drift) ||
        bucket.local_max_drift > result.local_max_drift) {
      result.local_max_drift = bucket.local_max_drift;
    }
    first = false;
    return absl::OkStatus();
  }));
  return result;
}

}  // namespace ringleader
