#include "worker/collective/key_value_store.h"

#include <algorithm>

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

}  // namespace ringleader
