#include "common/ulp.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(UlpTest, CountsRepresentableStepsBetweenFloats) {
  EXPECT_EQ(UlpDistance(1.0f, 1.0f), 0u);
  EXPECT_EQ(UlpDistance(0.0f, -0.0f), 0u);
  const float one_up = std::nextafter(1.0f, 2.0f);
  EXPECT_EQ(UlpDistance(1.0f, one_up), 1u);
  EXPECT_EQ(UlpDistance(one_up, 1.0f), 1u);
  EXPECT_EQ(UlpDistance(1.0f, std::nextafter(one_up, 2.0f)), 2u);
  // Across zero: the smallest positive and negative denormals are 2 steps apart.
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(UlpDistance(tiny, -tiny), 2u);
  // An average rounded once differently: (1+2+...+7)/7 = 4 exactly vs 28 * (1/7).
  const float premultiplied = 28.0f * (1.0f / 7.0f);
  EXPECT_LE(UlpDistance(premultiplied, 4.0f), 1u);
  EXPECT_GT(UlpDistance(1.0f, 1.001f), 1u);
  EXPECT_EQ(UlpDistance(std::nanf(""), 1.0f), std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace ringleader
