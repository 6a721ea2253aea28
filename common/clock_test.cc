#include "common/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(ClockTest, TheRealClockNeverGoesBackAndReadsAsWallTime) {
  Clock* clock = Clock::Real();
  absl::Time previous = clock->Now();
  for (int i = 0; i < 100000; ++i) {
    const absl::Time now = clock->Now();
    ASSERT_GE(now, previous);
    previous = now;
  }
  // Started from the wall clock: within a generous minute of it in a test run.
  EXPECT_LT(absl::AbsDuration(clock->Now() - absl::Now()), absl::Minutes(1));
}

TEST(ClockTest, AFakeClockMovesOnlyWhenTold) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(3));
}

}  // namespace
}  // namespace ringleader
