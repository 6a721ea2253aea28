#include "common/clock.h"
#include "common/ids.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

TEST(FakeClockTest, AdvancesOnlyWhenTold) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(3));
}

TEST(StrongIdTest, ComparesByValue) {
  EXPECT_EQ(Rank(3), Rank(3));
  EXPECT_NE(JobId("a"), JobId("b"));
}

TEST(ProtoTest, OptionalFieldsTrackPresence) {
  v1::OptimizerSpec opt;
  EXPECT_FALSE(opt.has_momentum());
  opt.set_momentum(0);
  EXPECT_TRUE(opt.has_momentum());
}

}  // namespace
}  // namespace ringleader
