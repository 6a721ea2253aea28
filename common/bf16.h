// bfloat16 <-> float conversion shared by host code (gloo reductions, safetensors files) and
// device code (kernels).
// bfloat16 is the upper 16 bits of an IEEE float32; values are stored as uint16_t.
#ifndef RINGLEADER_COMMON_BF16_H_
#define RINGLEADER_COMMON_BF16_H_

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace ringleader {

// Widens a bfloat16 to float; exact.
RL_HOST_DEVICE inline float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// Rounds a float to the nearest bfloat16, ties to even. Infinities stay infinities, overflow
// rounds to infinity, and every NaN stays a NaN (quietened, sign kept) — plain rounding could
// carry a NaN whose payload sits in the low 16 bits into an infinity.
RL_HOST_DEVICE inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_BF16_H_
