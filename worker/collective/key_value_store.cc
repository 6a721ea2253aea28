#include "worker/collective/key_value_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringleader {

absl::StatusOr<std::vector<std::string>> KeyValueStore::GetMany(
    const std::vector<std::string>& keys, const ValueParts& parts, absl::Duration timeout) {
  return GetEachKey(this, keys, parts, timeout, Clock::Real());
}

absl::StatusOr<std::vector<std::string>> GetEachKey(KeyValueStore* store,
                                                    const std::vector<std::string>& keys,
                                                    const ValueParts& parts, absl::Duration timeout,
                                                    Clock* clock) {
  if (absl::Status valid = CheckValueParts(keys.size(), parts); !valid.ok()) return valid;
  const absl::Time deadline = clock->Now() + timeout;
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<std::string> value =
        store->Get(keys[i], std::max(deadline - clock->Now(), absl::ZeroDuration()));
    if (!value.ok()) return value.status();
    values.push_back(parts.count == 0 ? *std::move(value)
                                      : CutValue(*value, parts.count, parts.index[i]));
  }
  return values;
}

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
