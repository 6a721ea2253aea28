#include "coordinator/core/kv_store.h"

#include <cstddef>
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
  deferred->Add([done = std::move(done), result = std::move(result)]() mutable {
    done(std::move(result));
  });
}

void CompleteMany(KvGetManyCallback done, absl::StatusOr<std::vector<std::string>> result,
                  DeferredCallbacks* deferred) {
  deferred->Add([done = std::move(done), result = std::move(result)]() mutable {
    done(std::move(result));
  });
}

// Keeps, in order, the waiters for which `keep` returns true (`keep` completes the others).
template <typename T, typename Keep>
void KeepIf(std::vector<T>* waiters, Keep keep) {
  size_t kept = 0;
  for (size_t i = 0; i < waiters->size(); ++i) {
    if (!keep((*waiters)[i])) continue;
    // Never self-move: a moved-onto-itself std::vector may come out empty.
    if (kept != i) (*waiters)[kept] = std::move((*waiters)[i]);
    ++kept;
  }
  waiters->erase(waiters->begin() + static_cast<std::ptrdiff_t>(kept), waiters->end());
}

}  // namespace

bool AttemptKvStore::Advance(const Attempt& entry, ManyWaiter* waiter) {
  while (waiter->missing < waiter->keys.size() &&
         entry.values.contains(waiter->keys[waiter->missing])) {
    ++waiter->missing;
  }
  return waiter->missing == waiter->keys.size();
}

std::vector<std::string> AttemptKvStore::Collect(const Attempt& entry, const ManyWaiter& waiter) {
  std::vector<std::string> values;
  values.reserve(waiter.keys.size());
  for (size_t i = 0; i < waiter.keys.size(); ++i) {
    const std::string& value = entry.values.at(waiter.keys[i]);
    values.push_back(waiter.parts.count == 0
                         ? value
                         : CutValue(value, waiter.parts.count, waiter.parts.index[i]));
  }
  return values;
}

size_t AttemptKvStore::KeyCount(const AttemptId& attempt) const {
  auto it = attempts_.find(attempt);
  return it == attempts_.end() ? 0 : it->second.values.size();
}

bool AttemptKvStore::Has(const AttemptId& attempt, const std::string& key) const {
  auto it = attempts_.find(attempt);
  return it != attempts_.end() && it->second.values.count(key) > 0;
}

void AttemptKvStore::Set(const AttemptId& attempt, const std::string& key, std::string value,
                         DeferredCallbacks* deferred) {
  Attempt& entry = attempts_[attempt];
  const std::string& stored = entry.values[key] = std::move(value);
  KeepIf(&entry.waiters, [&](Waiter& waiter) {
    if (waiter.key != key) return true;
    Complete(std::move(waiter.done), stored, deferred);
    return false;
  });
  // A GetMany waits for its keys in order: only one whose first missing key this is can move.
  KeepIf(&entry.many_waiters, [&](ManyWaiter& waiter) {
    if (waiter.keys[waiter.missing] != key || !Advance(entry, &waiter)) return true;
    CompleteMany(std::move(waiter.done), Collect(entry, waiter), deferred);
    return false;
  });
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

void AttemptKvStore::GetMany(const AttemptId& attempt, std::vector<std::string> keys,
                             KvParts parts, absl::Time deadline, absl::Time now,
                             KvGetManyCallback done, DeferredCallbacks* deferred) {
  if (absl::Status valid = CheckValueParts(keys.size(), parts); !valid.ok()) {
    return CompleteMany(std::move(done), valid, deferred);
  }
  Attempt& entry = attempts_[attempt];
  ManyWaiter waiter{std::move(keys), std::move(parts), 0, deadline, std::move(done)};
  if (Advance(entry, &waiter)) {
    CompleteMany(std::move(waiter.done), Collect(entry, waiter), deferred);
  } else if (deadline <= now) {
    CompleteMany(std::move(waiter.done), KeyDeadlineExceeded(attempt, waiter.keys[waiter.missing]),
                 deferred);
  } else {
    entry.many_waiters.push_back(std::move(waiter));
  }
}

void AttemptKvStore::ExpireWaiters(absl::Time now, DeferredCallbacks* deferred) {
  for (auto& [attempt, entry] : attempts_) {
    // A structured binding is captured through an init-capture: C++17 (and clang before 16)
    // does not let a lambda capture one directly.
    KeepIf(&entry.waiters, [&, &attempt = attempt](Waiter& waiter) {
      if (waiter.deadline > now) return true;
      Complete(std::move(waiter.done), KeyDeadlineExceeded(attempt, waiter.key), deferred);
      return false;
    });
    KeepIf(&entry.many_waiters, [&, &attempt = attempt](ManyWaiter& waiter) {
      if (waiter.deadline > now) return true;
      CompleteMany(std::move(waiter.done),
                   KeyDeadlineExceeded(attempt, waiter.keys[waiter.missing]), deferred);
      return false;
    });
  }
}

void AttemptKvStore::EndAttempt(const AttemptId& attempt, const absl::Status& why,
                                DeferredCallbacks* deferred) {
  auto it = attempts_.find(attempt);
  if (it == attempts_.end()) return;
  for (Waiter& waiter : it->second.waiters) Complete(std::move(waiter.done), why, deferred);
  for (ManyWaiter& waiter : it->second.many_waiters) {
    CompleteMany(std::move(waiter.done), why, deferred);
  }
  attempts_.erase(it);
}

void AttemptKvStore::FailAllWaiters(const absl::Status& why, DeferredCallbacks* deferred) {
  for (auto& [attempt, entry] : attempts_) {
    for (Waiter& waiter : entry.waiters) Complete(std::move(waiter.done), why, deferred);
    entry.waiters.clear();
    for (ManyWaiter& waiter : entry.many_waiters) {
      CompleteMany(std::move(waiter.done), why, deferred);
    }
    entry.many_waiters.clear();
  }
}

int AttemptKvStore::waiter_count() const {
  int count = 0;
  for (const auto& [attempt, entry] : attempts_) {
    count += static_cast<int>(entry.waiters.size() + entry.many_waiters.size());
  }
  return count;
}

}  // namespace ringleader
