// PlanParameters: frozen, fault-unused and bypassing parameters, and the spec errors.
#include "worker/rank/parameter_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<ParameterInfo> Infos() {
  return {{"fc1.weight", {2, 3}, 6},
          {"fc1.bias", {2}, 2},
          {"fc2.weight", {2, 2}, 4},
          {"fc2.bias", {2}, 2}};
}

TEST(ParameterPlanTest, EveryParameterIsTrainedByDefault) {
  absl::StatusOr<ParameterPlan> plan = PlanParameters(v1::JobSpec(), 0, Infos());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->trainable.size(), 4u);
  EXPECT_THAT(plan->reducer_index, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(plan->has_grad, ElementsAre(true, true, true, true));
  EXPECT_THAT(plan->skip, ElementsAre(false, false, false, false));
  EXPECT_FALSE(plan->bypass);
}

TEST(ParameterPlanTest, FrozenParametersLeaveTheReducer) {
  v1::JobSpec spec;
  spec.mutable_model()->add_frozen_parameters("fc1.bias");
  absl::StatusOr<ParameterPlan> plan = PlanParameters(spec, 0, Infos());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->trainable.size(), 3u);
  EXPECT_EQ(plan->trainable[1].name, "fc2.weight");
  EXPECT_THAT(plan->reducer_index, ElementsAre(0, -1, 1, 2));
  EXPECT_THAT(plan->has_grad, ElementsAre(true, false, true, true));
  EXPECT_THAT(plan->skip, ElementsAre(false, true, false, false));
}

// fsdp shards every parameter with its bucket: a frozen one stays in the reducer, ready from
// the start of every micro-batch, without gradient or step.
TEST(ParameterPlanTest, FsdpKeepsFrozenParametersInTheReducerAlwaysReady) {
  v1::JobSpec spec;
  spec.set_strategy("fsdp");
  spec.mutable_model()->add_frozen_parameters("fc1.bias");
  absl::StatusOr<ParameterPlan> plan = PlanParameters(spec, 0, Infos());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->trainable.size(), 4u);
  EXPECT_THAT(plan->reducer_index, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(plan->has_grad, ElementsAre(true, false, true, true));
  EXPECT_THAT(plan->skip, ElementsAre(false, true, false, false));
  EXPECT_THAT(plan->always_ready, ElementsAre(false, true, false, false));
  // Every parameter frozen: refused under fsdp too.
  for (const char* name : {"fc1.weight", "fc2.weight", "fc2.bias"}) {
    spec.mutable_model()->add_frozen_parameters(name);
  }
  EXPECT_EQ(PlanParameters(spec, 0, Infos()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParameterPlanTest, UnusedParametersStayInTheReducerOnlyOnTheFaultRank) {
  v1::JobSpec spec;
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc2.weight");
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  absl::StatusOr<ParameterPlan> on_rank_1 = PlanParameters(spec, 1, Infos());
  ASSERT_TRUE(on_rank_1.ok()) << on_rank_1.status();
  EXPECT_EQ(on_rank_1->trainable.size(), 4u);
  EXPECT_THAT(on_rank_1->skip, ElementsAre(false, false, true, false));
  EXPECT_THAT(on_rank_1->has_grad, ElementsAre(true, true, true, true));
  absl::StatusOr<ParameterPlan> on_rank_0 = PlanParameters(spec, 0, Infos());
  ASSERT_TRUE(on_rank_0.ok()) << on_rank_0.status();
  EXPECT_THAT(on_rank_0->skip, ElementsAre(false, false, false, false));
}

TEST(ParameterPlanTest, BypassAppliesToItsRankOnly) {
  v1::JobSpec spec;
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  EXPECT_TRUE(PlanParameters(spec, 1, Infos())->bypass);
  EXPECT_FALSE(PlanParameters(spec, 0, Infos())->bypass);
}

TEST(ParameterPlanTest, UnknownNamesAndAllFrozenAreSpecErrorsNamingTheField) {
  v1::JobSpec frozen_typo;
  frozen_typo.mutable_model()->add_frozen_parameters("fc9.weight");
  absl::Status s = PlanParameters(frozen_typo, 0, Infos()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("model.frozen_parameters: unknown parameter 'fc9.weight'"));

  v1::JobSpec unused_typo;
  unused_typo.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("nope");
  s = PlanParameters(unused_typo, 0, Infos()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.faults.unused_parameters_on_rank"));

  v1::JobSpec all_frozen;
  for (const ParameterInfo& info : Infos())
    all_frozen.mutable_model()->add_frozen_parameters(info.name);
  s = PlanParameters(all_frozen, 0, Infos()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("nothing to train"));
}

}  // namespace
}  // namespace ringleader
