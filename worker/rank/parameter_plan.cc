#include "worker/rank/parameter_plan.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec_kinds.h"

namespace ringleader {

absl::StatusOr<ParameterPlan> PlanParameters(const v1::JobSpec& spec, uint32_t rank,
                                             const std::vector<ParameterInfo>& infos) {
  std::set<std::string> known;
  for (const ParameterInfo& info : infos) known.insert(info.name);
  const std::set<std::string> frozen(spec.model().frozen_parameters().begin(),
                                     spec.model().frozen_parameters().end());
  for (const std::string& name : frozen) {
    if (!known.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.frozen_parameters: unknown parameter '", name, "'"));
    }
  }
  const v1::FaultSpec& faults = spec.model().faults();
  std::set<std::string> unused;
  if (faults.unused_parameter_rank() == static_cast<int32_t>(rank)) {
    for (const std::string& name : faults.unused_parameters_on_rank()) {
      if (!known.count(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.faults.unused_parameters_on_rank: unknown parameter '", name, "'"));
      }
      unused.insert(name);
    }
  }
  ParameterPlan plan;
  plan.bypass_all = faults.bypass_sync_all_ranks();
  plan.bypass = plan.bypass_all ||
                (faults.bypass_sync() && faults.bypass_sync_rank() == static_cast<int32_t>(rank));
  plan.skip.assign(infos.size(), false);
  plan.reducer_index.assign(infos.size(), -1);
  plan.has_grad.assign(infos.size(), true);
  plan.always_ready.assign(infos.size(), false);
  // fsdp shards every parameter with its gradient's bucket: a frozen one stays in the reducer.
  const bool fsdp = TraitsOf(StrategyOf(spec)).shards_parameters;
  for (size_t i = 0; i < infos.size(); ++i) {
    const bool is_frozen = frozen.count(infos[i].name) > 0;
    plan.has_grad[i] = !is_frozen;
    plan.skip[i] = is_frozen || unused.count(infos[i].name) > 0;
    plan.always_ready[i] = is_frozen && fsdp;
    if (!is_frozen || fsdp) {
      plan.reducer_index[i] = static_cast<int>(plan.trainable.size());
      plan.trainable.push_back(infos[i]);
    }
  }
  if (std::none_of(plan.has_grad.begin(), plan.has_grad.end(), [](bool b) { return b; })) {
    return absl::InvalidArgumentError(
        "model.frozen_parameters: every parameter is frozen; nothing to train");
  }
  return plan;
}

}  // namespace ringleader
