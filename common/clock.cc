#include "common/clock.h"

namespace ringleader {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();  // never destroyed: used until exit
  return clock;
}

}  // namespace ringleader
