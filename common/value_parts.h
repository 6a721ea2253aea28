// Reading only part of each value of a multi-key read: gloo stores one address blob per rank
// holding its address for every peer, and a rank needs only its own address out of each blob.
// Shared by the coordinator's KvGetMany and the worker's key-value stores.
#ifndef RINGLEADER_COMMON_VALUE_PARTS_H_
#define RINGLEADER_COMMON_VALUE_PARTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringleader {

// Which bytes of each value a multi-key read answers. count == 0: whole values. Otherwise a
// value of L bytes is cut into `count` parts of floor(L / count) bytes and the read of keys[i]
// answers part index[i]: bytes [index[i] * size, (index[i] + 1) * size).
struct ValueParts {
  uint32_t count = 0;
  std::vector<uint32_t> index;  // one per key when count > 0
};

// INVALID_ARGUMENT unless `parts` fits `keys` keys (see ValueParts).
absl::Status CheckValueParts(size_t keys, const ValueParts& parts);

// Part `index` of `count` equal parts of `value` (the whole value when count == 0; empty when
// index >= count).
std::string CutValue(const std::string& value, uint32_t count, uint32_t index);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_VALUE_PARTS_H_
