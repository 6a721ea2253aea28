#include "worker/collective/in_memory_key_value_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"

namespace ringleader {

absl::Status InMemoryKeyValueStore::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  if (!injected_error_.ok()) return injected_error_;
  values_[key] = value;
  // Waiters re-evaluate their conditions when the mutex is released; nothing else to signal.
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key,
                                                       absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !injected_error_.ok() || values_.count(key) > 0;
  };
  const bool done =
      mu_.AwaitWithTimeout(absl::Condition(&ready), std::max(timeout, absl::ZeroDuration()));
  if (!injected_error_.ok()) return injected_error_;
  if (!done) {
    return WithFailureKind(absl::DeadlineExceededError(absl::StrCat(
                               "key \"", key, "\" was not set within ",
                               absl::FormatDuration(timeout))),
                           v1::RankFailure::PEER_TIMED_OUT);
  }
  return values_.at(key);
}

void InMemoryKeyValueStore::InjectError(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  injected_error_ = error;
}

std::vector<std::string> InMemoryKeyValueStore::Keys() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  keys.reserve(values_.size());
  for (const auto& [key, value] : values_) keys.push_back(key);
  return keys;
}

}  // namespace ringleader
