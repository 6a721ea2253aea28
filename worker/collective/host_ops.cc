#include "worker/collective/host_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"

namespace ringleader {
namespace {

inline float MaxPropagatingNan(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

void SumF32(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(out);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void MaxF32(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(out);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = MaxPropagatingNan(x[i], y[i]);
}

void SumBf16(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FloatToBf16(Bf16ToFloat(x[i]) + Bf16ToFloat(y[i]));
}

void MaxBf16(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) {
    o[i] = FloatToBf16(MaxPropagatingNan(Bf16ToFloat(x[i]), Bf16ToFloat(y[i])));
  }
}

void SumU8(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint8_t*>(out);
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(x[i] + y[i]);
}

void MaxU8(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint8_t*>(out);
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
}

}  // namespace

PairwiseFn PairwiseReduction(DataType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::kMax;
  switch (dtype) {
    case DataType::kFloat32:
      return max ? MaxF32 : SumF32;
    case DataType::kBFloat16:
      return max ? MaxBf16 : SumBf16;
    case DataType::kUInt8:
      if (op == ReduceOp::kAvg) return nullptr;
      return max ? MaxU8 : SumU8;
  }
  return nullptr;  // unreachable: every enumerator is handled above
}

void DivideInPlace(void* data, size_t count, DataType dtype, int divisor) {
  if (divisor == 1) return;  // x / 1 == x: one rank averages nothing
  const float d = static_cast<float>(divisor);
  if (dtype == DataType::kFloat32) {
    auto* p = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) p[i] /= d;
  } else if (dtype == DataType::kBFloat16) {
    auto* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = FloatToBf16(Bf16ToFloat(p[i]) / d);
  }
}

absl::Status ValidateView(const TensorView& v, const char* name) {
  if (v.count > 0 && v.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data is null but ", name, ".count is ", v.count));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ValidateOp(DataType dtype, ReduceOp op) {
  if (PairwiseReduction(dtype, op) != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ReduceOpName(op), " is not supported on ",
                                                 DataTypeName(dtype),
                                                 "; use sum or max (or a float dtype for avg)"));
}

}  // namespace

absl::Status ValidateAllReduce(const TensorView& buf, ReduceOp op) {
  absl::Status valid = ValidateView(buf, "buf");
  return valid.ok() ? ValidateOp(buf.dtype, op) : valid;
}

absl::Status ValidateBroadcast(const TensorView& buf, int root, int world_size) {
  absl::Status valid = ValidateView(buf, "buf");
  if (valid.ok() && (root < 0 || root >= world_size)) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("root ", root, " is out of range; it must be in [0, ", world_size, ")"));
  }
  return valid;
}

absl::Status ValidateAllGather(const TensorView& in, const TensorView& out, int world_size) {
  absl::Status valid = ValidateView(in, "in");
  if (valid.ok()) valid = ValidateView(out, "out");
  if (valid.ok() &&
      (out.dtype != in.dtype || out.count != in.count * static_cast<size_t>(world_size))) {
    valid = absl::InvalidArgumentError(absl::StrCat(
        "out must hold world_size x in.count = ", world_size, " x ", in.count, " elements of ",
        DataTypeName(in.dtype), "; got ", out.count, " of ", DataTypeName(out.dtype)));
  }
  return valid;
}

absl::Status ValidateReduceScatter(const TensorView& in, const TensorView& out, ReduceOp op,
                                   int world_size) {
  absl::Status valid = ValidateView(in, "in");
  if (valid.ok()) valid = ValidateView(out, "out");
  if (valid.ok() &&
      (out.dtype != in.dtype || in.count != out.count * static_cast<size_t>(world_size))) {
    valid = absl::InvalidArgumentError(absl::StrCat(
        "in must hold world_size x out.count = ", world_size, " x ", out.count, " elements of ",
        DataTypeName(out.dtype), "; got ", in.count, " of ", DataTypeName(in.dtype)));
  }
  return valid.ok() ? ValidateOp(in.dtype, op) : valid;
}

absl::Status ValidateTimeout(absl::Duration timeout) {
  if (timeout < absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout ", absl::FormatDuration(timeout),
                     " must be finite and >= 0 (0 = the collective's default)"));
  }
  return absl::OkStatus();
}

}  // namespace ringleader
