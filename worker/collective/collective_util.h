// Pieces every backend's implementation shares: a Work finished by its backend's thread, and
// the argument checks of a rendezvous (store, key prefix, rank, world size, timeouts).
#ifndef RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_UTIL_H_
#define RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_UTIL_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

// A Work whose backend calls Start when it begins running it (optional) and Finish once (from
// any thread); Wait blocks until Finish.
class FinishableWork : public Work {
 public:
  std::optional<absl::Time> StartTime() const override {
    absl::MutexLock lock(&mu_);
    return start_;
  }
  // The backend begins running the operation at `at` (its clock).
  void Start(absl::Time at) {
    absl::MutexLock lock(&mu_);
    start_ = at;
  }
  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }
  bool IsDone() const override {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  absl::Duration Duration() const override {
    absl::MutexLock lock(&mu_);
    return duration_;
  }
  void Finish(absl::Status status, absl::Duration duration) {
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
    duration_ = duration;
    done_ = true;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<absl::Time> start_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Duration duration_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

// "<backend> rank R/N <what> bucket B count C": how a backend names one operation in its errors.
std::string DescribeOperation(const char* backend, int rank, int world_size,
                              const std::string& what, int bucket, size_t count);

// The Work of an operation refused on this rank before it was queued: `valid` (not OK) as
// INVALID_ARGUMENT "<description>: <message>"; or, with `valid` OK, the timeout's check.
// Returns null when the operation may be queued. A bad argument is the caller's bug on this
// rank only: it does not kill the collective.
std::shared_ptr<FinishableWork> RefuseInvalid(const std::string& description,
                                              const absl::Status& valid, absl::Duration timeout);

// INVALID_ARGUMENT naming the argument and the fix: a null store, an empty key prefix
// (`prefix_example` shows one), world_size < 1, rank outside [0, world_size).
absl::Status ValidateRendezvousArgs(const KeyValueStore* store, const std::string& key_prefix,
                                    const std::string& prefix_example, int rank, int world_size);

// INVALID_ARGUMENT "<options>.rendezvous_timeout is ..." unless both are finite and >= 1 ms.
absl::Status ValidateBackendTimeouts(const std::string& options, absl::Duration rendezvous_timeout,
                                     absl::Duration collective_timeout);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_COLLECTIVE_UTIL_H_
