#include "common/clock.h"

#include <chrono>

namespace ringleader {
namespace {

// The wall time when the process first asked, advanced by the monotonic (steady) clock: it never
// jumps backwards or forwards when the system time is set (NTP steps, an operator's `date`), so
// leases, deadlines and timeouts measured with it stay right, and it still reads as wall time
// for the timestamps shown to users.
class RealClock : public Clock {
 public:
  RealClock() : wall_start_(absl::Now()), steady_start_(std::chrono::steady_clock::now()) {}
  absl::Time Now() const override {
    return wall_start_ + absl::FromChrono(std::chrono::steady_clock::now() - steady_start_);
  }

 private:
  const absl::Time wall_start_;
  const std::chrono::steady_clock::time_point steady_start_;
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();  // never destroyed: used until exit
  return clock;
}

}  // namespace ringleader
