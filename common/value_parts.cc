#include "common/value_parts.h"

#include "absl/strings/str_cat.h"

namespace ringleader {

absl::Status CheckValueParts(size_t keys, const ValueParts& parts) {
  if (parts.count == 0) {
    if (parts.index.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("part_index has ", parts.index.size(),
                                                   " entries but parts is 0 (whole values)"));
  }
  if (parts.index.size() != keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        "part_index has ", parts.index.size(), " entries for ", keys, " keys: give one per key"));
  }
  for (size_t i = 0; i < keys; ++i) {
    if (parts.index[i] >= parts.count) {
      return absl::InvalidArgumentError(absl::StrCat("part_index[", i, "] is ", parts.index[i],
                                                     "; it must be < parts (", parts.count, ")"));
    }
  }
  return absl::OkStatus();
}

std::string CutValue(const std::string& value, uint32_t count, uint32_t index) {
  if (count == 0) return value;
  if (index >= count) return "";
  const size_t size = value.size() / count;
  return value.substr(static_cast<size_t>(index) * size, size);
}

}  // namespace ringleader
