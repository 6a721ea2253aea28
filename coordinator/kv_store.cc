#include "coordinator/kv_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

absl::Status KeyDeadlineExceeded(const AttemptId& attempt, const std::string& key) {
  return absl::DeadlineExceededError(absl::StrCat("key '", key, "' of job ", attempt.job.value(),
                                                  " generation ", attempt.generation.value(),
                                                  " was not set before the wait ran out"));
}

void Complete(KvGetCallback done, absl::StatusOr<std::string> result,
              DeferredCallbacks* deferred) {
  deferred->Add([done = std::move(done), result = std::move(result)]() { done(result); });
}

}  // namespace

void AttemptKvStore::Set(const AttemptId& attempt, const std::string& key, std::string value,
                         DeferredCallbacks* deferred) {
  Attempt& entry = attempts_[attempt];
  std::vector<Waiter> still_waiting;
  for (Waiter& waiter : entry.waiters) {
    if (waiter.key == key) {
      Complete(std::move(waiter.done), value, deferred);
    } else {
      still_waiting.push_back(std::move(waiter));
    }
  }
  entry.waiters = std::move(still_waiting);
  entry.values[key] = std::move(value);
}

void AttemptKvStore::Get(const AttemptId& attempt, const std::string& key, absl::Time deadline,
                         absl::Time now, KvGetCallback done, DeferredCallbacks* deferred) {
  Attempt& entry = attempts_[attempt];
  auto it = entry.values.find(key);
  if (it != entry.values.end()) {
    Complete(std::move(done), it->second, deferred);
  } else if (deadline <= now) {
    Complete(std::move(done), KeyDeadlineExceeded(attempt, key), deferred);
  } else {
    entry.waiters.push_back(Waiter{key, deadline, std::move(done)});
  }
}

void AttemptKvStore::ExpireWaiters(absl::Time now, DeferredCallbacks* deferred) {
  for (auto& [attempt, entry] : attempts_) {
    std::vector<Waiter> still_waiting;
    for (Waiter& waiter : entry.waiters) {
      if (waiter.deadline <= now) {
        Complete(std::move(waiter.done), KeyDeadlineExceeded(attempt, waiter.key), deferred);
      } else {
        still_waiting.push_back(std::move(waiter));
      }
    }
    entry.waiters = std::move(still_waiting);
  }
}

void AttemptKvStore::EndAttempt(const AttemptId& attempt, const absl::Status& why,
                                DeferredCallbacks* deferred) {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return;
  for (Waiter& waiter : it->second.waiters) Complete(std::move(waiter.done), why, deferred);
  attempts_.erase(it);
}

void AttemptKvStore::FailAllWaiters(const absl::Status& why, DeferredCallbacks* deferred) {
  for (auto& [attempt, entry] : attempts_) {
    for (Waiter& waiter : entry.waiters) Complete(std::move(waiter.done), why, deferred);
    entry.waiters.clear();
  }
}

int AttemptKvStore::waiter_count() const {
  int count = 0;
  for (const auto& [attempt, entry] : attempts_) count += static_cast<int>(entry.waiters.size());
  return count;
}

}  // namespace ringleader
