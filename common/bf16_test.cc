#include "common/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(Bf16Test, ExactValuesConvertExactly) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC040), -3.0f);
}

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  // Exactly halfway between 0x3F80 (even) and 0x3F81: stays even.
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808000)), 0x3F80);
  // Halfway between 0x3F81 (odd) and 0x3F82: goes to even.
  EXPECT_EQ(FloatToBf16(FromBits(0x3F818000)), 0x3F82);
  // Just above / below halfway.
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(FloatToBf16(FromBits(0x3F807FFF)), 0x3F80);
  // Carry into the exponent.
  EXPECT_EQ(FloatToBf16(FromBits(0x3FFFC000)), 0x4000);
}

TEST(Bf16Test, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7F80);
  EXPECT_EQ(FloatToBf16(-inf), 0xFF80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to inf
  // A NaN whose payload is only in the low bits must stay NaN (plain truncation gives inf).
  const uint16_t low_payload_nan = FloatToBf16(FromBits(0x7F800001));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(low_payload_nan)));
  const uint16_t negative_nan = FloatToBf16(FromBits(0xFFC00000));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(negative_nan)));
  EXPECT_EQ(negative_nan & 0x8000, 0x8000) << "sign kept";
}

TEST(Bf16Test, EveryNonNanBf16RoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), b) << std::hex << b;
  }
}

TEST(Bf16Test, RoundingErrorIsAtMostHalfAnUlp) {
  for (uint32_t bits = 0x3F800000; bits < 0x40000000; bits += 4099) {  // floats in [1, 2)
    const float f = FromBits(bits);
    const float r = Bf16ToFloat(FloatToBf16(f));
    ASSERT_LE(std::fabs(r - f), std::ldexp(1.0f, -8)) << f;  // bf16 ulp in [1,2) is 2^-7
  }
}

}  // namespace
}  // namespace ringleader
