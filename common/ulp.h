// Distance between two floats in units in the last place (ULPs): how many representable floats
// lie between them. Collectives that divide (kAvg) may round once differently from a reference
// computed another way, so their results are compared within 1 ULP rather than for equality.
#ifndef RINGLEADER_COMMON_ULP_H_
#define RINGLEADER_COMMON_ULP_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ringleader {

// ULPs between a and b (0 for equal values, +0 and -0 included); the maximum for NaNs.
inline uint64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<uint64_t>::max();
  // Map the float bit patterns onto a monotonic integer line (negative floats mirrored).
  const auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_ULP_H_
