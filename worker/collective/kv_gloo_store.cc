#include "worker/collective/kv_gloo_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace ringleader {

KvGlooStore::KvGlooStore(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
                         absl::Duration default_timeout, Clock* clock)
    : store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      default_timeout_(default_timeout),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

void KvGlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(key_prefix_ + key, std::string(data.begin(), data.end()));
  if (!status.ok()) Fail(status, "set");
}

std::vector<char> KvGlooStore::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(key_prefix_ + key, default_timeout_);
  if (!value.ok()) Fail(value.status(), "get");
  return std::vector<char>(value->begin(), value->end());
}

void KvGlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds::zero());
}

void KvGlooStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  // gloo::kNoTimeout (zero) would mean "forever"; a rendezvous must never wait forever, so it
  // means the default timeout here.
  const absl::Duration total =
      timeout == std::chrono::milliseconds::zero() ? default_timeout_ : absl::FromChrono(timeout);
  const absl::Time deadline = clock_->Now() + total;
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> value =
        store_->Get(key_prefix_ + key, std::max(deadline - clock_->Now(), absl::ZeroDuration()));
    if (!value.ok()) Fail(value.status(), "wait");
  }
}

absl::Status KvGlooStore::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

void KvGlooStore::Fail(const absl::Status& status, const char* method) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  const std::string message =
      absl::StrCat("rendezvous store ", method, " under \"", key_prefix_, "\": ", status.ToString());
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      // Environmental failures: gloo's recoverable I/O kind.
      throw gloo::IoException(message);
    default:
      throw gloo::EnforceNotMet(__FILE__, __LINE__, "store call succeeded", message);
  }
}

}  // namespace ringleader
