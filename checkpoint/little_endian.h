// Little-endian encoding of fixed-width integers and IEEE 754 floats, independent of the host's
// byte order: the on-disk formats (checkpoint.h, safetensors.h) are little-endian everywhere.
//
// The Load functions read exactly sizeof(T) bytes at `p`; bounds are the caller's to check.
#ifndef RINGLEADER_CHECKPOINT_LITTLE_ENDIAN_H_
#define RINGLEADER_CHECKPOINT_LITTLE_ENDIAN_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace ringleader {

template <typename T>
inline void AppendLittleEndian(std::string* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename T>
inline T LoadLittleEndian(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

inline void AppendFloat32(std::string* out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  AppendLittleEndian<uint32_t>(out, bits);
}

inline float LoadFloat32(const char* p) {
  const uint32_t bits = LoadLittleEndian<uint32_t>(p);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// `count` floats, as AppendFloat32 each; one copy on a little-endian host (a checkpoint's
// tensors are most of its bytes).
inline void AppendFloats32(std::string* out, const float* values, size_t count) {
  if (count == 0) return;
  if constexpr (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
    out->append(reinterpret_cast<const char*>(values), count * sizeof(float));
  } else {
    for (size_t k = 0; k < count; ++k) AppendFloat32(out, values[k]);
  }
}

// `count` floats from `p`, as LoadFloat32 each.
inline void LoadFloats32(const char* p, size_t count, float* values) {
  if (count == 0) return;
  if constexpr (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
    std::memcpy(values, p, count * sizeof(float));
  } else {
    for (size_t k = 0; k < count; ++k) values[k] = LoadFloat32(p + 4 * k);
  }
}

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_LITTLE_ENDIAN_H_
