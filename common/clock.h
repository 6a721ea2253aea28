// The one injected clock. Every time read in library code goes through a `Clock`, so tests drive
// time with `FakeClock` and never sleep.
#ifndef RINGLEADER_COMMON_CLOCK_H_
#define RINGLEADER_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringleader {

// Source of the current time. Thread-safe. Owned by whoever builds the component (main() or a
// test) and outlives it.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real clock: monotonic (steady-clock driven, immune to the system time being
  // set), reading as the wall time at its first use plus the time elapsed since.
  static Clock* Real();
};

// A clock that moves only when told. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_CLOCK_H_
