#include "worker/sync/fsdp_parameters.h"

#include <algorithm>
#include <cmath>
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
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "fsdp parameters"));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  std::unique_ptr<FsdpParameters> made(
      new FsdpParameters(comm, std::move(params), std::move(plan), opts, memory));
  ASSIGN_OR_RETURN(made->shard_,
                   TensorBuffer<float>::Allocate(memory, made->plan_.shard_elements()));
  if (made->shard_.size() > 0) {
    RETURN_IF_ERROR(memory->Zero(made->shard_.data(), made->shard_.bytes()));
  }
  return made;
}

FsdpParameters::FsdpParameters(Collective* comm, std::vector<ParameterInfo> params, FsdpPlan plan,
                               FsdpParametersOptions opts, TensorMemory* memory)
    : comm_(comm),
      params_(std::move(params)),
      plan_(std::move(plan)),
      opts_(opts),
      memory_(memory),
      rank_(static_cast<size_t>(comm->rank())) {}

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
  return absl::OkStatus();
}

float* FsdpParameters::owned_parameter(size_t i) {
  if (plan_.zero2.shards.owned[rank_][i].empty()) return nullptr;
  return shard_.data() + plan_.zero2.ShardPosition(rank_, i);
}

size_t FsdpParameters::StagingHeld() const {
  size_t held = 0;
  for (const auto& [b, buffer] : held_) held += buffer.size();
  return held;
}

size_t FsdpParameters::parameter_bytes() const {
  return sizeof(float) * (plan_.shard_elements() + staging_peak_);
}

absl::Status FsdpParameters::Gather(size_t b, int layer) {
  const Zero2Plan& z = plan_.zero2;
  const size_t s = z.slice[b];
  // The all-gather writes every one of the N x s_b floats: nothing to zero.
  ASSIGN_OR_RETURN(TensorBuffer<float> staging,
                   TensorBuffer<float>::Allocate(memory_, s * z.world_size));
  TensorBuffer<float>& out = held_[b] = std::move(staging);
  staging_peak_ = std::max(staging_peak_, StagingHeld());
  if (opts_.ledger != nullptr) {
    opts_.ledger->Record(CollectiveKind::kAllGather, static_cast<int32_t>(b), s,
                         DataType::kFloat32);
  }
  CollectiveOptions options;
  options.timeout = opts_.timeout;
  options.bucket = static_cast<int>(b);
  ++gathers_;
  const absl::Status done =
      comm_
          ->AllGather(TensorView{shard_.data() + z.shard_offset[b], s, DataType::kFloat32},
                      TensorView{out.data(), out.size(), DataType::kFloat32}, options)
          ->Wait();
  if (done.ok()) return done;
  held_.erase(b);
  return WithPrefix(done, absl::StrCat("fsdp parameter gather of bucket ", b,
                                       layer >= 0 ? absl::StrCat(" (layer ", layer, ")") : "",
                                       ": "));
}

const float* FsdpParameters::InBucket(size_t i) const {
  const BucketLayout& layout = plan_.zero2.layout;
  const size_t b = layout.param_bucket[i];
  return held_.at(b).data() + (layout.param_offset[i] - layout.buckets[b].offset);
}

absl::StatusOr<LayerParameters> FsdpParameters::Acquire(size_t k) {
  if (k >= plan_.layer_params.size() || plan_.layer_params[k].size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp parameters: layer ", k, " is not a layer of weight and bias (the plan has ",
        plan_.layer_params.size(), " layers)"));
  }
  const std::vector<size_t>& needed = plan_.layer_buckets[k];
  for (auto it = held_.begin(); it != held_.end();) {
    if (std::find(needed.begin(), needed.end(), it->first) == needed.end()) {
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t b : needed) {
    if (held_.count(b) == 0) RETURN_IF_ERROR(Gather(b, static_cast<int>(k)));
  }
  return LayerParameters{InBucket(plan_.layer_params[k][0]), InBucket(plan_.layer_params[k][1])};
}

void FsdpParameters::Release() { held_.clear(); }

absl::Status FsdpParameters::ForEachGatheredBucket(
    const std::function<absl::Status(size_t b)>& fn) {
  Release();
  for (size_t b = 0; b < plan_.zero2.layout.buckets.size(); ++b) {
    RETURN_IF_ERROR(Gather(b, -1));
    const absl::Status s = fn(b);
    Release();
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
