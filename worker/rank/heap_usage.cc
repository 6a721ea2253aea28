#include "worker/rank/heap_usage.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ringleader {

uint64_t HeapInUseBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
#else
  return 0;
#endif
}

void HeapGrowth::Start() {
  started_ = true;
  baseline_bytes_ = HeapInUseBytes();
  peak_bytes_ = 0;
}

void HeapGrowth::MoveBaseline(uint64_t from, uint64_t to) {
  baseline_bytes_ = to >= from ? baseline_bytes_ + (to - from)
                               : baseline_bytes_ - std::min(baseline_bytes_, from - to);
}

void HeapGrowth::Sample() {
  if (!started_) return;
  const uint64_t now = HeapInUseBytes();
  if (now > baseline_bytes_) peak_bytes_ = std::max(peak_bytes_, now - baseline_bytes_);
}

HeapSampler::HeapSampler(HeapGrowth* growth, absl::Duration interval)
    : growth_(growth), thread_([this, interval] {
        do {
          growth_->Sample();
          ++samples_;
        } while (!stop_.WaitForNotificationWithTimeout(interval));
      }) {}

HeapSampler::~HeapSampler() {
  stop_.Notify();
  thread_.join();
  growth_->Sample();
}

}  // namespace ringleader
