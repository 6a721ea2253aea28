// StepJudge: every check, its evidence and its policy, on hand-made reports (no clock, no gRPC).
#include "coordinator/core/step_judge.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A clean report: every rank holds the same synced norm; local norms differ by rank.
v1::StepReport Report(uint64_t step, uint32_t rank, double synced = 2.0) {
  v1::StepReport r;
  r.set_step(step);
  r.set_loss(1.0 / step);
  r.set_local_grad_norm(1.0 + 0.25 * rank);
  r.set_synced_grad_norm(synced);
  r.set_collective_digest(0xabc);
  r.set_collectives(3);
  r.set_step_ms(10);
  r.set_compute_ms(6);
  r.set_comm_ms(4);
  return r;
}

class StepJudgeTest : public ::testing::Test {
 protected:
  // Feeds `steps` steps of `world` ranks, rank by rank, through `judge`, letting `edit` change
  // each report first; returns the alarms raised.
  template <typename Edit>
  std::vector<v1::Alarm> Feed(StepJudge& judge, uint32_t world, uint64_t steps, Edit edit) {
    return FeedSteps(judge, world, 1, steps, edit);
  }
  // Steps `first`..`last` (as Feed).
  template <typename Edit>
  std::vector<v1::Alarm> FeedSteps(StepJudge& judge, uint32_t world, uint64_t first,
                                   uint64_t last, Edit edit) {
    std::vector<v1::Alarm> raised;
    for (uint64_t s = first; s <= last; ++s) {
      for (uint32_t r = 0; r < world; ++r) {
        v1::StepReport report = Report(s, r);
        edit(r, &report);
        judge.Add(r, report, &raised);
      }
    }
    return raised;
  }
  std::vector<v1::Alarm> FeedClean(StepJudge& judge, uint32_t world, uint64_t steps) {
    return Feed(judge, world, steps, [](uint32_t, v1::StepReport*) {});
  }
};

TEST_F(StepJudgeTest, CleanStepsOfFourRanksRaiseNothingAndPass) {
  StepJudge judge(4, {});
  EXPECT_THAT(FeedClean(judge, 4, 100), IsEmpty());
  EXPECT_THAT(judge.alarms(), IsEmpty());
  EXPECT_EQ(judge.verdict().result(), v1::Verdict::PASS);
  EXPECT_EQ(judge.verdict().steps_judged(), 100u);
  EXPECT_EQ(judge.verdict().first_bad_step(), 0u);
  EXPECT_EQ(judge.verdict().last_size(), 4);
  EXPECT_EQ(judge.pending_steps(), 0u);
}

TEST_F(StepJudgeTest, RevisionMovesOnlyWhenTheJudgementMayHaveChanged) {
  StepJudge judge(2, {});
  EXPECT_EQ(judge.revision(), 0u);
  judge.Add(0, Report(1, 0), nullptr);  // step 1 waits for rank 1: nothing judged
  EXPECT_EQ(judge.revision(), 0u);
  judge.Add(1, Report(1, 1), nullptr);  // step 1 judged
  const uint64_t judged = judge.revision();
  EXPECT_GT(judged, 0u);
  judge.SetDetectedTime(5);  // no new alarm to stamp
  EXPECT_EQ(judge.revision(), judged);
  v1::StepReport nan = Report(2, 0);
  nan.set_loss(std::nan(""));
  judge.Add(0, nan, nullptr);  // LOSS_NOT_FINITE at once
  EXPECT_GT(judge.revision(), judged);
  const uint64_t raised = judge.revision();
  judge.SetDetectedTime(6);  // stamps the new alarm
  EXPECT_GT(judge.revision(), raised);
}

TEST_F(StepJudgeTest, ARankSteppingWithItsLocalGradientsIsNamedAtTheFirstStep) {
  StepJudge judge(3, {});
  // Rank 1 bypasses: it still issues the collectives, but steps with its local gradients.
  auto raised = Feed(judge, 3, 5, [](uint32_t r, v1::StepReport* report) {
    if (r == 1) report->set_synced_grad_norm(report->local_grad_norm());
  });
  ASSERT_EQ(raised.size(), 1u);
  const v1::Alarm& a = raised[0];
  EXPECT_EQ(a.kind(), v1::Alarm::NOT_SYNCHRONIZED);
  EXPECT_EQ(a.step(), 1u);
  EXPECT_THAT(a.ranks(), ElementsAre(1u));
  EXPECT_TRUE(a.failed_job());
  EXPECT_THAT(a.message(), HasSubstr("rank 1 did not synchronise its gradients"));
  EXPECT_THAT(a.message(), HasSubstr("synced norm = local norm"));
  EXPECT_EQ(judge.verdict().result(), v1::Verdict::FAIL);
  EXPECT_EQ(judge.verdict().first_bad_step(), 1u);
  ASSERT_EQ(judge.verdict().first_bad_size(), 3);
  EXPECT_DOUBLE_EQ(judge.verdict().first_bad(1).synced_grad_norm(), 1.25);
  // The same failure at steps 2..5 is one alarm with four repeats.
  ASSERT_EQ(judge.alarms().size(), 1u);
  EXPECT_EQ(judge.alarms()[0].repeats(), 4u);
  EXPECT_EQ(judge.alarms()[0].last_step(), 5u);
}

// The motivating bug: every rank computes its loss on the unwrapped model. No peer looks
// different, but no collective was issued and the synced norms differ with the data.
TEST_F(StepJudgeTest, EveryRankBypassingIsCaughtAtTheFirstStep) {
  StepJudge judge(4, {});
  auto raised = Feed(judge, 4, 2, [](uint32_t, v1::StepReport* report) {
    report->set_synced_grad_norm(report->local_grad_norm());
    report->set_collectives(0);
    report->set_collective_digest(0);
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::NOT_SYNCHRONIZED);
  EXPECT_EQ(raised[0].step(), 1u);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_THAT(raised[0].message(), HasSubstr("no rank synchronised its gradients"));
  EXPECT_THAT(raised[0].message(), HasSubstr("issued no collective"));
}

TEST_F(StepJudgeTest, SyncedNormsThatDifferWithoutABypassNameTheOutlier) {
  StepJudge judge(4, {});
  auto raised = Feed(judge, 4, 1, [](uint32_t r, v1::StepReport* report) {
    if (r == 2) report->set_synced_grad_norm(2.5);
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::GRAD_NORM_MISMATCH);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(2u));
  EXPECT_THAT(raised[0].message(), HasSubstr("relative difference 0.2 > checks.grad_norm_rtol"));
  EXPECT_THAT(raised[0].message(), HasSubstr("rank 2 2.5"));
}

TEST_F(StepJudgeTest, DifferencesWithinTheToleranceAreNotAlarms) {
  StepJudgeOptions options;
  options.grad_norm_rtol = 1e-4;  // the bf16 default
  StepJudge judge(2, options);
  auto raised = Feed(judge, 2, 10, [](uint32_t r, v1::StepReport* report) {
    report->set_synced_grad_norm(2.0 * (1 + 5e-5 * r));
  });
  EXPECT_THAT(raised, IsEmpty());
  StepJudge strict(2, {});  // fp32: 1e-6
  EXPECT_EQ(Feed(strict, 2, 1,
                 [](uint32_t r, v1::StepReport* report) {
                   report->set_synced_grad_norm(2.0 * (1 + 5e-5 * r));
                 })
                .size(),
            1u);
}

TEST_F(StepJudgeTest, DifferentCollectiveSequencesNameTheMinorityAndBothSides) {
  StepJudge judge(3, {});
  auto raised = Feed(judge, 3, 1, [](uint32_t r, v1::StepReport* report) {
    if (r == 0) {
      report->set_collective_digest(0xdef);
      report->set_collectives(2);
    }
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::COLLECTIVE_MISMATCH);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(0u));
  EXPECT_THAT(raised[0].message(), HasSubstr("rank 0: 2 collectives (digest 0000000000000def)"));
  EXPECT_THAT(raised[0].message(), HasSubstr("ranks 1,2: 3 collectives"));
}

TEST_F(StepJudgeTest, DriftAboveToleranceNamesTheWorstTensorAtTheDriftStep) {
  StepJudge judge(3, {});
  auto raised = Feed(judge, 3, 10, [](uint32_t r, v1::StepReport* report) {
    if (report->step() % 5 != 0) return;
    report->set_has_drift(true);
    report->set_drift(r == 2 ? 0.03 : r == 1 ? 0.01 : 0);
    report->set_drift_parameter(r == 2 ? "fc2.weight" : "fc1.bias");
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::DRIFT);
  EXPECT_EQ(raised[0].step(), 5u);
  EXPECT_EQ(raised[0].tensor(), "fc2.weight");
  EXPECT_THAT(raised[0].ranks(), ElementsAre(1u, 2u));
  EXPECT_THAT(raised[0].message(), HasSubstr("max|W_r - W_0| = 0.03 (tensor fc2.weight)"));
  EXPECT_EQ(judge.alarms()[0].last_step(), 10u);
}

TEST_F(StepJudgeTest, ANonFiniteLossIsRaisedAtOnceWithoutWaitingForThePeers) {
  StepJudge judge(2, {});
  std::vector<v1::Alarm> raised;
  v1::StepReport report = Report(7, 1);
  report.set_loss(std::numeric_limits<double>::quiet_NaN());
  judge.Add(1, report, &raised);
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::LOSS_NOT_FINITE);
  EXPECT_EQ(raised[0].step(), 7u);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(1u));
  EXPECT_THAT(raised[0].message(), HasSubstr("rank 1's loss is nan"));
  EXPECT_EQ(judge.verdict().steps_judged(), 0u);  // step 7 still waits for rank 0
}

TEST_F(StepJudgeTest, AStepIsJudgedOnceEveryRankIsAtOrPastIt) {
  StepJudge judge(2, {});
  std::vector<v1::Alarm> raised;
  judge.Add(0, Report(1, 0), &raised);
  judge.Add(0, Report(2, 0), &raised);
  judge.Add(0, Report(3, 0), &raised);
  EXPECT_EQ(judge.pending_steps(), 3u);
  EXPECT_EQ(judge.verdict().steps_judged(), 0u);
  judge.Add(1, Report(1, 1), &raised);
  EXPECT_EQ(judge.verdict().steps_judged(), 1u);
  // Rank 1's reporter dropped step 2 under back-pressure: step 3 judges step 2 without it.
  judge.Add(1, Report(3, 1), &raised);
  EXPECT_EQ(judge.verdict().steps_judged(), 3u);
  EXPECT_EQ(judge.pending_steps(), 0u);
  // A repeated or old report changes nothing.
  judge.Add(1, Report(2, 1, /*synced=*/99), &raised);
  EXPECT_THAT(raised, IsEmpty());
}

TEST_F(StepJudgeTest, UnderWarnTheAlarmsAreKeptButDoNotFailTheJob) {
  StepJudgeOptions options;
  options.fail_on_desync = false;
  StepJudge judge(2, options);
  auto raised = Feed(judge, 2, 3, [](uint32_t r, v1::StepReport* report) {
    if (r == 1) report->set_synced_grad_norm(report->local_grad_norm());
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_FALSE(raised[0].failed_job());
  EXPECT_EQ(judge.verdict().result(), v1::Verdict::WARN);
  EXPECT_EQ(judge.verdict().first_bad_step(), 1u);
}

TEST_F(StepJudgeTest, WithoutArrivalTimesASlowComputeIsFlaggedInTwoWindowsInARow) {
  StepJudgeOptions options;
  options.straggler_window = 10;
  StepJudge judge(4, options);
  // One window (640 ms) meets the bar: not yet an alarm.
  auto edit = [](uint32_t r, v1::StepReport* report) {
    // Rank 3 computes 10x longer; the others wait for it in their collectives.
    report->set_compute_ms(r == 3 ? 60 : 6);
    report->set_comm_ms(r == 3 ? 4 : 58);
    report->set_step_ms(64);
  };
  EXPECT_THAT(Feed(judge, 4, 10, edit), IsEmpty());
  ASSERT_EQ(judge.stragglers().size(), 4u);
  EXPECT_FALSE(judge.stragglers()[3].flagged());
  const std::vector<v1::Alarm> raised = FeedSteps(judge, 4, 11, 20, edit);
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].kind(), v1::Alarm::STRAGGLER);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(3u));
  EXPECT_FALSE(raised[0].failed_job());
  EXPECT_THAT(raised[0].message(), HasSubstr("median compute 60.0 ms vs 6.0 ms"));
  EXPECT_EQ(judge.verdict().result(), v1::Verdict::WARN);
  EXPECT_EQ(judge.verdict().first_bad_step(), 0u);  // slow is not wrong
  ASSERT_EQ(judge.stragglers().size(), 4u);
  EXPECT_TRUE(judge.stragglers()[3].flagged());
  EXPECT_EQ(judge.stragglers()[3].suspected_cause(), "compute");
  EXPECT_DOUBLE_EQ(judge.stragglers()[3].ratio_to_median(), 10);
  EXPECT_FALSE(judge.stragglers()[0].flagged());
}

TEST_F(StepJudgeTest, EvenStepTimesFlagNobody) {
  StepJudgeOptions options;
  options.straggler_window = 5;
  options.straggler_window_ms = 0;
  StepJudge judge(3, options);
  EXPECT_THAT(FeedClean(judge, 3, 20), IsEmpty());
  ASSERT_EQ(judge.stragglers().size(), 3u);
  for (const v1::StragglerScore& s : judge.stragglers()) EXPECT_FALSE(s.flagged());
}

// Sets how long each of the step's collectives ran on the rank (us).
void Times(v1::StepReport* report, std::vector<uint32_t> us, uint64_t first = 0) {
  report->mutable_collective_times()->set_first_sequence(first);
  for (uint32_t t : us) report->mutable_collective_times()->add_duration_us(t);
}

TEST_F(StepJudgeTest, TheRankTheOthersWaitForIsTheStragglerNotTheOneThatWaits) {
  StepJudgeOptions options;
  options.straggler_window = 10;
  options.straggler_window_ms = 0;
  StepJudge judge(2, options);
  // Rank 1 computes 8 ms, rank 0 2 ms: rank 0 arrives first and waits in every collective
  // (long durations, long comm_ms); rank 1 arrives last and only transfers.
  auto edit = [](uint32_t r, v1::StepReport* report) {
    report->set_compute_ms(r == 1 ? 8 : 2);
    report->set_comm_ms(r == 1 ? 0.3 : 6.3);
    report->set_step_ms(8.4);
    if (r == 0) {
      Times(report, {5000, 1200, 100});
    } else {
      Times(report, {100, 100, 100});
    }
  };
  auto raised = Feed(judge, 2, 10, edit);
  EXPECT_THAT(raised, IsEmpty());  // one window: not yet
  ASSERT_EQ(judge.stragglers().size(), 2u);
  EXPECT_DOUBLE_EQ(judge.stragglers()[1].score(), 1.0);
  EXPECT_DOUBLE_EQ(judge.stragglers()[0].score(), 0.0);
  EXPECT_NEAR(judge.stragglers()[1].mean_wait_caused_ms(), 6.0, 1e-9);
  EXPECT_DOUBLE_EQ(judge.stragglers()[1].last_arrival_fraction(), 1.0);
  EXPECT_NEAR(judge.stragglers()[1].ratio_to_median(), 4.0, 1e-9);  // (2 + 6) / 2
  const std::vector<v1::Alarm> more = FeedSteps(judge, 2, 11, 20, edit);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_THAT(more[0].ranks(), ElementsAre(1u));
  EXPECT_THAT(more[0].message(), HasSubstr("waited 6.0 ms a step for it"));
  EXPECT_THAT(more[0].message(), HasSubstr("suspected cause: compute"));
  EXPECT_TRUE(judge.stragglers()[1].flagged());
  EXPECT_EQ(judge.stragglers()[1].suspected_cause(), "compute");
  EXPECT_FALSE(judge.stragglers()[0].flagged());  // it waited: that is not slowness
}

TEST_F(StepJudgeTest, WaitingInCollectivesNeverNamesALinkOrTheFasterRank) {
  // The demo's old false alarm: rank 0 spends 1.1 ms "communicating" against rank 1's 0.2 ms
  // because it arrives first and waits, on a shared-memory job, over many windows; and a
  // slow transfer that every rank sees alike.
  StepJudgeOptions options;
  options.straggler_window = 20;
  options.straggler_window_ms = 0;
  StepJudge judge(2, options);
  auto raised = Feed(judge, 2, 400, [](uint32_t r, v1::StepReport* report) {
    const uint64_t step = report->step();
    report->set_compute_ms(0.5);
    report->set_comm_ms(r == 0 ? 1.1 : 0.2);
    report->set_step_ms(1.6);
    // Who arrives last alternates with the step; the transfer (9 ms) is slow for everyone.
    const bool late = (step + r) % 2 == 0;
    Times(report, {late ? 9000u : 9900u, 9000u});
  });
  EXPECT_THAT(raised, IsEmpty());
  for (const v1::StragglerScore& s : judge.stragglers()) {
    EXPECT_FALSE(s.flagged());
    EXPECT_NEAR(s.score(), 0.5, 0.06);
    EXPECT_EQ(s.suspected_cause(), "");
  }
  EXPECT_EQ(judge.verdict().result(), v1::Verdict::PASS);
}

TEST_F(StepJudgeTest, AThrottledRankThatStallsInFewStepsIsStillTheStraggler) {
  // A CPU quota lets a rank run at full speed for a while, then stalls it for 80 ms: most
  // steps look even, the median would hide it, the waiting it causes does not.
  StepJudgeOptions options;
  options.straggler_window = 20;
  options.straggler_window_ms = 0;
  StepJudge judge(3, options);
  auto raised = Feed(judge, 3, 40, [](uint32_t r, v1::StepReport* report) {
    const bool stall = report->step() % 5 == 0;
    report->set_compute_ms(r == 2 && stall ? 81 : 1);
    report->set_step_ms(stall ? 82 : 2);
    if (r == 2) {
      Times(report, {200, 200});
    } else {
      Times(report, {stall ? 80200u : 250u, 200});
    }
  });
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_THAT(raised[0].ranks(), ElementsAre(2u));
  ASSERT_EQ(judge.stragglers().size(), 3u);
  EXPECT_TRUE(judge.stragglers()[2].flagged());
  EXPECT_GT(judge.stragglers()[2].score(), 0.99);
  EXPECT_NEAR(judge.stragglers()[2].mean_wait_caused_ms(), 16.04, 1e-6);
  EXPECT_FALSE(judge.stragglers()[0].flagged());
  EXPECT_FALSE(judge.stragglers()[1].flagged());
}

TEST_F(StepJudgeTest, AWindowLastsAtLeastItsTime) {
  StepJudgeOptions options;
  options.straggler_window = 5;
  options.straggler_window_ms = 100;  // 10 ms steps: 10 steps
  StepJudge judge(2, options);
  FeedClean(judge, 2, 9);
  EXPECT_THAT(judge.stragglers(), IsEmpty());
  std::vector<v1::Alarm> raised;
  judge.Add(0, Report(10, 0), &raised);
  judge.Add(1, Report(10, 1), &raised);
  EXPECT_EQ(judge.stragglers().size(), 2u);
}

TEST_F(StepJudgeTest, SamplesPerSecondCountTheWholeJobOverTheSlowestRanksStepTime) {
  StepJudgeOptions options;
  options.samples_per_step = 64 * 2;  // batch 64, 2 ranks
  StepJudge judge(2, options);
  FeedClean(judge, 2, 10);  // 10 ms per step
  EXPECT_DOUBLE_EQ(judge.verdict().samples_per_second(), 128 / 0.010);
}

TEST_F(StepJudgeTest, DetectionTimesAreStampedOnNewAlarmsOnly) {
  StepJudge judge(2, {});
  auto first = Feed(judge, 2, 1, [](uint32_t r, v1::StepReport* report) {
    if (r == 1) report->set_synced_grad_norm(report->local_grad_norm());
  });
  judge.SetDetectedTime(1000);
  std::vector<v1::Alarm> raised;
  v1::StepReport nan = Report(2, 0);
  nan.set_loss(std::numeric_limits<double>::infinity());
  judge.Add(0, nan, &raised);
  judge.SetDetectedTime(2000);
  ASSERT_EQ(judge.alarms().size(), 2u);
  EXPECT_EQ(judge.alarms()[0].detected_unix_ms(), 1000);
  EXPECT_EQ(judge.alarms()[1].detected_unix_ms(), 2000);
}

TEST(StepJudgeOptionsTest, TheSpecsDefaultsAndPolicy) {
  v1::JobSpec spec;
  spec.set_world_size(2);
  ApplyJobSpecDefaults(&spec);
  StepJudgeOptions o = StepJudgeOptionsFromSpec(spec);
  EXPECT_DOUBLE_EQ(o.grad_norm_rtol, 1e-6);
  EXPECT_DOUBLE_EQ(o.drift_tolerance, 1e-6);
  EXPECT_DOUBLE_EQ(o.straggler_factor, 2.0);
  EXPECT_TRUE(o.fail_on_desync);
  EXPECT_DOUBLE_EQ(o.samples_per_step, 64 * 2);

  v1::JobSpec bf16;
  bf16.set_world_size(2);
  bf16.mutable_sync()->set_comm_dtype("bf16");
  bf16.mutable_checks()->set_on_desync("warn");
  ApplyJobSpecDefaults(&bf16);
  o = StepJudgeOptionsFromSpec(bf16);
  EXPECT_DOUBLE_EQ(o.grad_norm_rtol, 1e-4);
  EXPECT_FALSE(o.fail_on_desync);
}

TEST_F(StepJudgeTest, AStepFarAheadNeitherExhaustsMemoryNorStopsTheJudging) {
  StepJudge judge(2, {});
  std::vector<v1::Alarm> raised;
  // A resumed attempt starts far from step 1: judging starts at its first step.
  judge.Add(0, Report(5000000, 0), &raised);
  judge.Add(1, Report(5000000, 1), &raised);
  judge.Add(0, Report(5000001, 0), &raised);
  judge.Add(1, Report(5000001, 1), &raised);
  EXPECT_EQ(judge.verdict().steps_judged(), 5000001u);  // judged through that step
  // While a step is pending, one reported absurdly far ahead (a forged report) is ignored.
  judge.Add(0, Report(5000002, 0), &raised);
  judge.Add(1, Report(uint64_t{1} << 62, 1), &raised);
  judge.Add(1, Report(5000002, 1), &raised);
  EXPECT_EQ(judge.verdict().steps_judged(), 5000002u);
  EXPECT_THAT(raised, IsEmpty());
}

}  // namespace
}  // namespace ringleader
