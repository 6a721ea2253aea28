// What the C heap really holds, from glibc's allocator counters (mallinfo2): the bytes handed out
// by malloc/new over every arena, small blocks (uordblks) and mmapped large ones (hblkhd). A
// rank takes a baseline once its data set is loaded and samples through its first step: the
// high-water growth is what its training state costs, activations, the trainer's scratch, the
// collective library's heap buffers and allocator rounding included (RankMemory.allocator_bytes).
// Not counted: memory outside malloc (shared-memory segments, thread stacks, GPU memory) and free
// bytes the allocator keeps cached.
#ifndef RINGLEADER_WORKER_RANK_HEAP_USAGE_H_
#define RINGLEADER_WORKER_RANK_HEAP_USAGE_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ringleader {

// Bytes of the process's C heap in use now (every thread's arena). 0 where the C library has
// no mallinfo2 (not glibc, or glibc before 2.33).
uint64_t HeapInUseBytes();

// The heap's growth over a baseline, as a high-water mark of the samples taken. Not
// thread-safe: one thread samples at a time (HeapSampler hands it over and back).
class HeapGrowth {
 public:
  // Takes the baseline and forgets earlier samples.
  void Start();
  // Moves the baseline by what some work outside the measured state changed (in use `from`
  // before it, `to` after), e.g. freeing part of the data set.
  void MoveBaseline(uint64_t from, uint64_t to);
  // Samples the heap now; a figure below the baseline counts as 0. Nothing before Start.
  void Sample();
  // The largest growth sampled since Start (0 before Start or without mallinfo2).
  uint64_t peak_bytes() const { return peak_bytes_; }
  bool started() const { return started_; }

 private:
  bool started_ = false;
  uint64_t baseline_bytes_ = 0;
  uint64_t peak_bytes_ = 0;
};

// Samples `growth` every `interval` on a thread of its own from construction until destruction,
// and once more in the destructor: the high-water mark of a stretch of work, counting the
// transient blocks that live about `interval` or longer. `growth` must outlive it.
class HeapSampler {
 public:
  HeapSampler(HeapGrowth* growth, absl::Duration interval);
  ~HeapSampler();
  HeapSampler(const HeapSampler&) = delete;
  HeapSampler& operator=(const HeapSampler&) = delete;

  // Samples taken so far by the thread (any thread may read it).
  uint64_t samples_taken() const { return samples_.load(); }

 private:
  HeapGrowth* const growth_;
  absl::Notification stop_;
  std::atomic<uint64_t> samples_{0};  // before thread_: the thread counts into it
  std::thread thread_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_HEAP_USAGE_H_
