// The strategy registry: JobSpec.strategy -> its class. A new strategy is one class and one case
// here (docs/architecture.md).
#include "worker/strategy/sync_strategy.h"

#include "common/job_spec.h"
#include "common/status_macros.h"
#include "worker/strategy/ddp_strategy.h"
#include "worker/strategy/fsdp_strategy.h"
#include "worker/strategy/zero1_strategy.h"
#include "worker/strategy/zero2_strategy.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<SyncStrategy>> CreateSyncStrategy(const StrategyContext& context) {
  // The coordinator refused these at submit; a rank checks again before any collective.
  RETURN_IF_ERROR(ValidateStrategyCombination(*context.spec));
  switch (StrategyOf(*context.spec)) {
    case Strategy::kDdp:
      return std::make_unique<DdpStrategy>(context);
    case Strategy::kZero1:
      return std::make_unique<Zero1Strategy>(context);
    case Strategy::kZero2: {
      ASSIGN_OR_RETURN(Zero2Plan plan, PlanZero2For(context));
      return std::make_unique<Zero2Strategy>(context, std::move(plan));
    }
    case Strategy::kFsdp: {
      ASSIGN_OR_RETURN(FsdpPlan plan, PlanFsdpFor(context));
      return std::make_unique<FsdpStrategy>(context, std::move(plan));
    }
  }
  return absl::InternalError("CreateSyncStrategy: a strategy without a class");
}

}  // namespace ringleader
