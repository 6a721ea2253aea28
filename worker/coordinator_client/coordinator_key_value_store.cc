#include "worker/coordinator_client/coordinator_key_value_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"

namespace ringleader {

CoordinatorKeyValueStore::CoordinatorKeyValueStore(CoordinatorClient* client, std::string job_id,
                                                   uint64_t generation,
                                                   CoordinatorKeyValueStoreOptions options)
    : client_(client),
      job_id_(std::move(job_id)),
      generation_(generation),
      options_(options),
      clock_(options.clock ? options.clock : Clock::Real()) {}

absl::Status CoordinatorKeyValueStore::Set(const std::string& key, const std::string& value) {
  v1::KvSetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(key);
  request.set_value(value);
  return client_->KvSet(request).status();
}

absl::StatusOr<std::string> CoordinatorKeyValueStore::Get(const std::string& key,
                                                          absl::Duration timeout) {
  const absl::Time deadline = clock_->Now() + timeout;
  v1::KvGetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(key);
  while (true) {
    const absl::Duration left = deadline - clock_->Now();
    if (left <= absl::ZeroDuration()) break;
    // At least 1 ms: a 0 ms wait could be read as "use the server's default".
    const int64_t wait_ms =
        std::max<int64_t>(1, absl::ToInt64Milliseconds(std::min(left, options_.poll_interval)));
    request.set_wait_timeout_ms(static_cast<uint32_t>(wait_ms));
    absl::StatusOr<v1::KvGetResponse> response = client_->KvGet(request);
    if (response.ok()) return std::string(response->value());
    // DEADLINE_EXCEEDED from KvGet means "not there yet": poll again until our own deadline.
    if (response.status().code() != absl::StatusCode::kDeadlineExceeded) {
      return response.status();
    }
  }
  return WithFailureKind(
      absl::DeadlineExceededError(absl::StrCat("key '", key, "' of job ", job_id_, " generation ",
                                               generation_, " did not appear within ",
                                               absl::FormatDuration(timeout))),
      v1::RankFailure::PEER_TIMED_OUT);
}

absl::StatusOr<std::vector<std::string>> CoordinatorKeyValueStore::GetMany(
    const std::vector<std::string>& keys, const ValueParts& parts, absl::Duration timeout) {
  if (keys.empty() || !has_get_many_.load()) {
    return GetEachKey(this, keys, parts, timeout, clock_);  // no keys: nothing to ask
  }
  const absl::Time deadline = clock_->Now() + timeout;
  v1::KvGetManyRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  for (const std::string& key : keys) request.add_keys(key);
  request.set_parts(parts.count);
  for (uint32_t index : parts.index) request.add_part_index(index);
  absl::Status not_yet;  // the coordinator's last "not there yet", naming the first missing key
  while (true) {
    const absl::Duration left = deadline - clock_->Now();
    if (left <= absl::ZeroDuration()) break;
    const int64_t wait_ms =
        std::max<int64_t>(1, absl::ToInt64Milliseconds(std::min(left, options_.poll_interval)));
    request.set_wait_timeout_ms(static_cast<uint32_t>(wait_ms));
    absl::StatusOr<v1::KvGetManyResponse> response = client_->KvGetMany(request);
    if (response.ok()) {
      if (response->values_size() != static_cast<int>(keys.size())) {
        return absl::InternalError(absl::StrCat("KvGetMany answered ", response->values_size(),
                                                " values for ", keys.size(), " keys"));
      }
      return std::vector<std::string>(response->values().begin(), response->values().end());
    }
    if (response.status().code() == absl::StatusCode::kUnimplemented) {
      // A coordinator older than KvGetMany: key by key, within what is left of the timeout.
      has_get_many_.store(false);
      return GetEachKey(this, keys, parts, deadline - clock_->Now(), clock_);
    }
    // DEADLINE_EXCEEDED from KvGetMany means "not all there yet": poll again until our deadline.
    if (response.status().code() != absl::StatusCode::kDeadlineExceeded) {
      return response.status();
    }
    not_yet = response.status();
  }
  return WithFailureKind(
      absl::DeadlineExceededError(absl::StrCat(
          keys.size(), " keys of job ", job_id_, " generation ", generation_,
          " did not all appear within ", absl::FormatDuration(timeout),
          not_yet.ok() ? absl::StrCat(" (the first: '", keys.empty() ? "" : keys[0], "')")
                       : absl::StrCat(": ", not_yet.message()))),
      v1::RankFailure::PEER_TIMED_OUT);
}

}  // namespace ringleader
