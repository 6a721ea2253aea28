// A TensorMemory for tests that stands in for device memory on a machine without a GPU:
//
//   * host_accessible() is false, so users stage every small value through CopyFromHost /
//     CopyToHost exactly as they must on a GPU;
//   * allocations come from the test memory's own pool and start filled with NaN bytes (0xFF),
//     so a user that reads memory it never zeroed or wrote through the seam sees NaN;
//   * every operation is counted, and every pointer range it touches is checked against the
//     live allocations: an out-of-range pointer is a violation, and the operation is refused
//     (INTERNAL, nothing written); freeing an unknown pointer is a violation; live_allocations()
//     shows leaks;
//   * kind() is chosen at construction: kHost runs over gloo (the data really is host memory),
//     kDevice exercises the memory-kind checks against a host collective;
//   * with `guard` the pool's pages are inaccessible (mprotect PROT_NONE) except while one of
//     its operations runs: any direct host access by the code under test crashes the test at
//     the offending instruction. A collective must then move data only inside WithAccess (a
//     world-size-1 fake does; gloo's threads cannot, so use guard only with such a fake).
//
// Thread-safe (one mutex); results are computed with HostMemory()'s arithmetic.
#ifndef RINGLEADER_WORKER_SYNC_RECORDING_TENSOR_MEMORY_H_
#define RINGLEADER_WORKER_SYNC_RECORDING_TENSOR_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/sync/tensor_memory.h"

namespace ringleader {
namespace sync_test {

class RecordingTensorMemory : public TensorMemory {
 public:
  enum class Op {
    kAllocate,
    kFree,
    kZero,
    kCopyFromHost,
    kCopyToHost,
    kCopy,
    kCastToBf16,
    kCastFromBf16,
    kMaxAbsDiff,
    kSquaredSum,
    kAdd,
  };

  explicit RecordingTensorMemory(MemoryKind kind = MemoryKind::kHost, bool guard = false);
  ~RecordingTensorMemory() override;

  MemoryKind kind() const override { return kind_; }
  bool host_accessible() const override { return false; }
  std::string name() const override { return "recording test memory"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status CastToBf16(const float* src, uint16_t* dst, size_t count) override;
  absl::Status CastFromBf16(const uint16_t* src, float* dst, size_t count) override;
  absl::Status MaxAbsDiff(const std::vector<const float*>& a, const std::vector<const float*>& b,
                          const std::vector<size_t>& counts, std::vector<double>* out) override;
  absl::Status SquaredSum(const float* src, size_t count, double* out) override;
  absl::Status Add(float* dst, const float* src, size_t count) override;

  // How many times `op` ran.
  size_t count(Op op) const;
  // One line per misuse: a range outside every live allocation, freeing an unknown pointer.
  std::vector<std::string> violations() const;
  size_t live_allocations() const;
  // True if [p, p + bytes) lies inside one live allocation.
  bool Contains(const void* p, size_t bytes) const;
  // Runs fn with the pool accessible (for a fake collective's data movement under `guard`).
  void WithAccess(const std::function<void()>& fn);

 private:
  void Note(Op op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a violation and returns false unless [p, p + bytes) is inside a live allocation.
  bool CheckRangeLocked(const void* p, size_t bytes, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // INTERNAL naming the last violation: the operation was not performed.
  absl::Status RefusedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ContainsLocked(const void* p, size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens / closes every pool page (no-ops without guard).
  void OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `op` with the pool open.
  absl::Status OpenedLocked(const std::function<absl::Status()>& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MemoryKind kind_;
  const bool guard_;
  mutable absl::Mutex mu_;
  // Live allocations (their own mmap'ed pages) by start address -> requested bytes: the pool.
  std::map<const uint8_t*, size_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::map<Op, size_t> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sync_test
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_RECORDING_TENSOR_MEMORY_H_
