// No false alarm: real ranks (threads, gloo over loopback, the real training loop and reducer)
// train clean jobs, and every step they report goes through the coordinator's StepJudge with the
// job's own check options. Across fp32 and bf16 communication, 2 and 4 ranks, gradient
// accumulation and unused parameters with find_unused_parameters, not one check may fail.
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "coordinator/core/step_judge.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gloo_ranks_test_util.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

struct Case {
  std::string name;
  uint32_t world_size = 2;
  std::string comm_dtype = "fp32";
  uint32_t accumulation = 1;
  bool unused_with_find_unused = false;
};

v1::JobSpec SpecFor(const Case& c) {
  v1::JobSpec spec;
  spec.set_name(c.name);
  spec.set_world_size(c.world_size);
  for (uint32_t width : {16u, 32u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(1024);
  spec.mutable_data()->set_max_test_examples(128);
  spec.set_epochs(2);
  spec.set_batch_size(16);
  spec.set_drift_interval_steps(3);
  spec.set_collective_timeout_ms(20000);
  spec.mutable_sync()->set_first_bucket_mb(0.001);
  spec.mutable_sync()->set_bucket_cap_mb(0.002);
  spec.mutable_sync()->set_comm_dtype(c.comm_dtype);
  spec.mutable_sync()->set_gradient_accumulation_steps(c.accumulation);
  if (c.unused_with_find_unused) {
    spec.mutable_sync()->set_find_unused_parameters(true);
    spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
    spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc2.bias");
  }
  ApplyJobSpecDefaults(&spec);
  return spec;
}

class NoFalseAlarmTest : public ::testing::TestWithParam<Case> {};

TEST_P(NoFalseAlarmTest, EveryStepOfACleanJobPassesEveryCheck) {
  testing_util::Watchdog watchdog(absl::Seconds(120), GetParam().name);
  const v1::JobSpec spec = SpecFor(GetParam());
  FakeCoordinator fake(JobSpecFingerprint(spec));
  const std::vector<RankRunResult> results = RunRanksOverGloo(spec, &fake);

  StepJudge judge(spec.world_size(), StepJudgeOptionsFromSpec(spec));
  std::vector<v1::Alarm> raised;
  uint64_t steps = 0;
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    ASSERT_TRUE(results[rank].status.ok()) << "rank " << rank << ": " << results[rank].status;
    steps = std::max<uint64_t>(steps, fake.steps(rank).size());
  }
  // Interleave the ranks step by step, as the coordinator receives them.
  for (uint64_t i = 0; i < steps; ++i) {
    for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
      const std::vector<v1::StepReport> reports = fake.steps(rank);
      if (i < reports.size()) judge.Add(rank, reports[i], &raised);
    }
  }
  ASSERT_GT(steps, 10u);
  EXPECT_EQ(judge.verdict().steps_judged(), steps);
  for (const v1::Alarm& alarm : raised) {
    // Stragglers too: they are judged from arrival times, and waiting is not slowness.
    ADD_FAILURE() << v1::Alarm::Kind_Name(alarm.kind()) << ": " << alarm.message();
  }
  EXPECT_NE(judge.verdict().result(), v1::Verdict::FAIL);
}

INSTANTIATE_TEST_SUITE_P(
    CleanJobs, NoFalseAlarmTest,
    ::testing::Values(Case{"fp32_2_ranks"}, Case{"bf16_2_ranks", 2, "bf16"},
                      Case{"fp32_4_ranks", 4}, Case{"bf16_4_ranks", 4, "bf16"},
                      Case{"accumulation", 2, "fp32", 2},
                      Case{"find_unused", 2, "fp32", 1, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ringleader
