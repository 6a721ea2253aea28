// MetricsHistory: every point of recent steps, bounded decimation of older ones, samples/s.
#include "coordinator/core/metrics_history.h"

#include <set>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

v1::StepReport Report(uint64_t step) {
  v1::StepReport r;
  r.set_step(step);
  r.set_loss(1.0 / step);
  r.set_local_grad_norm(1.5);
  r.set_synced_grad_norm(2.0);
  r.set_step_ms(8);
  r.set_compute_ms(5);
  r.set_comm_ms(3);
  return r;
}

TEST(MetricsHistoryTest, KeepsEveryRanksFiguresAndItsTrainingRate) {
  MetricsHistory history(2, /*samples_per_rank_step=*/64);
  for (uint64_t s = 1; s <= 3; ++s) {
    history.Add(0, Report(s));
    history.Add(1, Report(s));
  }
  v1::StepReport drifted = Report(4);
  drifted.set_has_drift(true);
  drifted.set_drift(0.5);
  history.Add(1, drifted);
  v1::GetJobMetricsResponse out;
  history.Export(&out);
  ASSERT_EQ(out.points_size(), 7);
  EXPECT_EQ(out.points(0).step(), 1u);
  EXPECT_EQ(out.points(0).rank(), 0u);
  EXPECT_EQ(out.points(1).rank(), 1u);
  EXPECT_FLOAT_EQ(out.points(2).loss(), 0.5f);
  EXPECT_DOUBLE_EQ(out.points(0).samples_per_second(), 64 / 0.008);
  EXPECT_EQ(out.points(6).step(), 4u);
  EXPECT_TRUE(out.points(6).has_drift());
  EXPECT_FLOAT_EQ(out.points(6).drift(), 0.5f);
  EXPECT_EQ(out.decimation_stride(), 1u);
}

TEST(MetricsHistoryTest, OldStepsAreDecimatedSoMemoryStaysBounded) {
  constexpr size_t kFull = 100;
  MetricsHistory history(1, 0, kFull);
  for (uint64_t s = 1; s <= 100000; ++s) {
    history.Add(0, Report(s));
    ASSERT_LE(history.steps_held(), 2 * kFull + 1) << "at step " << s;
  }
  v1::GetJobMetricsResponse out;
  history.Export(&out);
  EXPECT_GT(out.decimation_stride(), 1u);
  std::set<uint64_t> steps;
  for (const v1::MetricsPoint& p : out.points()) steps.insert(p.step());
  // The recent window is whole...
  for (uint64_t s = 100000 - kFull + 1; s <= 100000; ++s) EXPECT_TRUE(steps.count(s)) << s;
  // ...and older steps are spread over the whole job, every one on the stride.
  EXPECT_LT(*steps.begin(), 100000u / 4);
  for (uint64_t s : steps) {
    if (s <= 100000 - kFull) EXPECT_EQ(s % out.decimation_stride(), 0u) << s;
  }
}

}  // namespace
}  // namespace ringleader
