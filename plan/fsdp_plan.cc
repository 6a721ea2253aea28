#include "plan/fsdp_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

std::vector<std::vector<size_t>> MlpLayerParameters(size_t layers) {
  std::vector<std::vector<size_t>> out;
  for (size_t k = 0; k < layers; ++k) out.push_back({2 * k, 2 * k + 1});
  return out;
}

absl::StatusOr<FsdpPlan> PlanFsdp(const std::vector<size_t>& counts,
                                  std::vector<std::vector<size_t>> layer_params,
                                  size_t world_size, const BucketLayoutOptions& options) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.frozen_parameters: strategy fsdp shards every parameter and parameter ", i,
          " is frozen; unfreeze it or use strategy zero2"));
    }
  }
  std::vector<int> layer_of(counts.size(), -1);
  for (size_t k = 0; k < layer_params.size(); ++k) {
    for (size_t i : layer_params[k]) {
      if (i >= counts.size() || layer_of[i] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fsdp plan: layer ", k, " names parameter ", i,
            i >= counts.size() ? absl::StrCat(" of ", counts.size()) : " twice"));
      }
      layer_of[i] = static_cast<int>(k);
    }
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    if (layer_of[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("fsdp plan: parameter ", i, " is in no layer"));
    }
  }
  FsdpPlan plan;
  auto zero2 = PlanZero2(counts, world_size, options);
  if (!zero2.ok()) return zero2.status();
  plan.zero2 = *std::move(zero2);
  plan.layer_params = std::move(layer_params);
  const size_t n = plan.zero2.world_size;
  for (const std::vector<size_t>& params : plan.layer_params) {
    std::vector<size_t> buckets;
    // No frozen parameter: trainable index == model index.
    for (size_t i : params) buckets.push_back(plan.zero2.layout.param_bucket[i]);
    std::sort(buckets.begin(), buckets.end());
    buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    size_t staging = 0;
    for (size_t b : buckets) staging += n * plan.zero2.slice[b];
    plan.staging_elements = std::max(plan.staging_elements, staging);
    plan.layer_buckets.push_back(std::move(buckets));
  }
  return plan;
}

}  // namespace ringleader
