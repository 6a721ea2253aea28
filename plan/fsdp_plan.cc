#include "plan/fsdp_plan.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

std::vector<std::vector<size_t>> MlpLayerParameters(size_t layers) {
  std::vector<std::vector<size_t>> out;
  for (size_t k = 0; k < layers; ++k) out.push_back({2 * k, 2 * k + 1});
  return out;
}

std::vector<size_t> MlpLayerAccessOrder(size_t layers) {
  std::vector<size_t> order;
  for (size_t k = 0; k < layers; ++k) order.push_back(k);
  for (size_t k = layers; k-- > 1;) order.push_back(k);
  return order;
}

namespace {

std::vector<size_t> Union(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  std::vector<size_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

bool Contains(const std::vector<size_t>& sorted, size_t x) {
  return std::binary_search(sorted.begin(), sorted.end(), x);
}

// The pass's requests (see the header): held = the layer's buckets and the next other layer's.
std::vector<FsdpRequest> PlanPass(const std::vector<std::vector<size_t>>& layer_buckets,
                                  const std::vector<size_t>& order) {
  std::vector<FsdpRequest> pass;
  std::vector<size_t> held;
  for (size_t i = 0; i < order.size(); ++i) {
    FsdpRequest r;
    r.layer = order[i];
    const std::vector<size_t>& now = layer_buckets[r.layer];
    std::vector<size_t> next;
    for (size_t j = i + 1; j < order.size(); ++j) {
      if (order[j] != r.layer) {
        next = layer_buckets[order[j]];
        break;
      }
    }
    r.held = Union(now, next);
    for (size_t b : held) {
      if (!Contains(r.held, b)) r.release.push_back(b);
    }
    for (size_t b : now) {
      if (!Contains(held, b)) r.gather.push_back(b);
    }
    for (size_t b : next) {
      if (!Contains(held, b) && !Contains(now, b)) {
        r.gather.push_back(b);
        ++r.prefetched;
      }
    }
    held = r.held;
    pass.push_back(std::move(r));
  }
  return pass;
}

// Staging places (see the header). Buckets are placed in the order of their first gather;
// `together[a][b]` says whether a and b are ever held at once. Two ways, the smaller kept:
//   two-ended: within an arena of `limit` = the most any request holds, the buckets first
//     needed by an even layer go as low as they fit, an odd layer's as high: the layer
//     computing and the one arriving come from opposite ends, so equal or unequal layers meet
//     in the middle and the arena is exactly that most (fails if a bucket finds no place);
//   first fit: each at the lowest offset clear of the buckets it is held with (always works).
struct Placement {
  std::vector<size_t> offset;
  size_t size = 0;
  bool ok = true;
};

Placement Place(const FsdpPlan& plan, const std::vector<size_t>& order,
                const std::vector<bool>& low_side,
                const std::vector<std::vector<bool>>& together, size_t limit) {
  const size_t buckets = order.size();
  Placement p;
  p.offset.assign(buckets, 0);
  std::vector<bool> placed(buckets, false);
  for (size_t b : order) {
    const size_t size = plan.gathered_elements(b);
    std::vector<size_t> candidates = {0};
    if (limit >= size) candidates.push_back(limit - size);
    for (size_t c = 0; c < buckets; ++c) {
      if (!placed[c] || !together[b][c]) continue;
      candidates.push_back(p.offset[c] + plan.gathered_elements(c));
      if (p.offset[c] >= size) candidates.push_back(p.offset[c] - size);
    }
    std::sort(candidates.begin(), candidates.end());
    if (!low_side[b]) std::reverse(candidates.begin(), candidates.end());
    bool found = false;
    for (size_t at : candidates) {
      if (at + size > limit) continue;
      bool clear = true;
      for (size_t c = 0; c < buckets && clear; ++c) {
        if (!placed[c] || !together[b][c]) continue;
        const size_t begin = p.offset[c];
        const size_t end = begin + plan.gathered_elements(c);
        clear = at + size <= begin || end <= at;
      }
      if (clear) {
        p.offset[b] = at;
        found = true;
        break;
      }
    }
    if (!found) {
      p.ok = false;
      return p;
    }
    placed[b] = true;
    p.size = std::max(p.size, p.offset[b] + size);
  }
  return p;
}

void PlaceStaging(FsdpPlan* plan) {
  const size_t buckets = plan->zero2.layout.buckets.size();
  std::vector<std::vector<bool>> together(buckets, std::vector<bool>(buckets, false));
  std::vector<size_t> order;
  std::vector<bool> ordered(buckets, false);
  std::vector<bool> low_side(buckets, true);
  size_t most = 0;
  for (size_t i = 0; i < plan->pass.size(); ++i) {
    const FsdpRequest& r = plan->pass[i];
    size_t held = 0;
    for (size_t a : r.held) {
      held += plan->gathered_elements(a);
      for (size_t b : r.held) together[a][b] = true;
    }
    most = std::max(most, held);
    const std::vector<size_t>& mine = plan->layer_buckets[r.layer];
    for (size_t b : r.gather) {
      if (ordered[b]) continue;
      ordered[b] = true;
      order.push_back(b);
      // The layer it is first needed for: this one, or (prefetched) the next other layer.
      size_t layer = r.layer;
      if (std::find(mine.begin(), mine.end(), b) == mine.end()) {
        for (size_t j = i + 1; j < plan->pass.size(); ++j) {
          if (plan->pass[j].layer != r.layer) {
            layer = plan->pass[j].layer;
            break;
          }
        }
      }
      low_side[b] = layer % 2 == 0;
    }
  }
  for (size_t b = 0; b < buckets; ++b) {
    if (!ordered[b]) order.push_back(b);  // in no layer: impossible once PlanFsdp checked
  }
  Placement best = Place(*plan, order, low_side, together, most);
  if (!best.ok) {
    best = Place(*plan, order, std::vector<bool>(buckets, true), together,
                 std::numeric_limits<size_t>::max() / 2);
  }
  plan->staging_offset = std::move(best.offset);
  plan->staging_elements = best.size;
}

}  // namespace

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
  for (const std::vector<size_t>& params : plan.layer_params) {
    std::vector<size_t> buckets;
    // No frozen parameter: trainable index == model index.
    for (size_t i : params) buckets.push_back(plan.zero2.layout.param_bucket[i]);
    std::sort(buckets.begin(), buckets.end());
    buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    plan.layer_buckets.push_back(std::move(buckets));
  }
  plan.access_order = MlpLayerAccessOrder(plan.layer_params.size());
  plan.pass = PlanPass(plan.layer_buckets, plan.access_order);
  PlaceStaging(&plan);
  return plan;
}

}  // namespace ringleader
