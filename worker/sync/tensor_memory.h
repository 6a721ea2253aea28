// The memory seam of the gradient reducer and the drift check: the few operations they perform on
// their working memory (the bucket arena, its bf16 wire copy, small staging buffers), so one
// reducer runs over host memory (gloo) and device memory (NCCL) alike, without knowing which.
//
// Like PyTorch DDP's reducer, which allocates its buckets with the parameters' device and
// launches copies and casts there, the reducer asks a `TensorMemory` for everything it does to
// its arena:
//
//   Allocate / Free         the arena, the bf16 wire buffer, staging buffers
//   Zero                    ZeroGradients, unready parameters' slots
//   CopyFromHost/ToHost     small host values: the readiness sentinel, the unused-parameter
//                           bitmaps, the ledger summaries, the rebuilt bucket order
//   Copy                    arena to arena on a bucket rebuild
//   CastToBf16/FromBf16     the bf16 wire format (common/bf16.h's rounding, nearest-even)
//   MaxAbsDiff              the drift check's per-tensor max|a - b|
//   SquaredSum              strategy zero2's norm of its gradient shard
//   Add                     strategy zero2's gradient accumulation into its shard
//
// Ordering: every operation is ordered after every earlier operation of the same TensorMemory
// and after the caller's own compute work (device implementations enqueue on the trainer's
// compute stream, which the collective waits for before each operation). CopyToHost returns
// with the data on the host; CopyFromHost's source may be reused as soon as it returns.
//
// Implementations: HostMemory() below (plain host memory: memset, memcpy, loops — what the
// reducer always did, no extra copy) and gpu::CudaTensorMemory
// (worker/sync/gpu/cuda_tensor_memory.h).
// Thread-safety: an implementation is used by one training thread at a time; HostMemory() is
// stateless and may be shared.
#ifndef RINGLEADER_WORKER_SYNC_TENSOR_MEMORY_H_
#define RINGLEADER_WORKER_SYNC_TENSOR_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/collective/collective.h"

namespace ringleader {

class TensorMemory {
 public:
  virtual ~TensorMemory() = default;

  // What a Collective sees: must equal the collective's memory_kind() (the reducer checks).
  virtual MemoryKind kind() const = 0;
  // True when the host may read and write allocations directly (plain host memory): small
  // exchanges then run in place. False: they are staged with CopyFromHost / CopyToHost.
  virtual bool host_accessible() const = 0;
  // For messages: "host", "cuda:0".
  virtual std::string name() const = 0;

  // `bytes` (> 0) of uninitialised memory. Errors: RESOURCE_EXHAUSTED (out of memory),
  // FAILED_PRECONDITION "no usable GPU: ..." and INTERNAL for device failures.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Releases an allocation (null: nothing), after every operation issued on it so far.
  virtual void Free(void* ptr) = 0;

  // The operations. Pointers lie inside allocations of this memory, except the host side of
  // CopyFromHost / CopyToHost. Errors: the device's (see Allocate); host memory never fails.
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  virtual absl::Status CopyFromHost(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CastToBf16(const float* src, uint16_t* dst, size_t count) = 0;
  virtual absl::Status CastFromBf16(const uint16_t* src, float* dst, size_t count) = 0;
  // (*out)[i] = max over k < counts[i] of |a[i][k] - b[i][k]|, computed in double (exact for
  // floats); NaN when any difference is NaN; 0 for an empty tensor. One host round trip.
  virtual absl::Status MaxAbsDiff(const std::vector<const float*>& a,
                                  const std::vector<const float*>& b,
                                  const std::vector<size_t>& counts, std::vector<double>* out) = 0;
  // *out = the sum over k < count of src[k]^2, computed in double (each square exact; the
  // summation order is the implementation's: in index order on the host, by blocks on a GPU,
  // which differ by ~1e-15 relative). 0 for count 0. One host round trip.
  virtual absl::Status SquaredSum(const float* src, size_t count, double* out) = 0;
  // dst[k] += src[k] for k < count, in fp32 (one rounding per element, the same everywhere).
  virtual absl::Status Add(float* dst, const float* src, size_t count) = 0;
};

// Plain host memory (operator new, memset, memcpy, common/bf16.h). Never fails but for allocation
// (RESOURCE_EXHAUSTED). Process-wide, stateless.
TensorMemory* HostMemory();

// INVALID_ARGUMENT unless `memory` (null = HostMemory()) has the collective's memory kind. `who`
// starts the message ("reducer", "drift check").
absl::Status CheckMemoryMatches(const Collective& comm, const TensorMemory* memory,
                                const char* who);

// Owns `count` elements of T allocated in a TensorMemory; move-only. Freed (in the memory's
// order) on destruction.
template <typename T>
class TensorBuffer {
 public:
  TensorBuffer() = default;
  // Errors: Allocate's.
  static absl::StatusOr<TensorBuffer> Allocate(TensorMemory* memory, size_t count) {
    TensorBuffer b;
    b.memory_ = memory;
    b.count_ = count;
    if (count == 0) return b;
    absl::StatusOr<void*> ptr = memory->Allocate(count * sizeof(T));
    if (!ptr.ok()) return ptr.status();
    b.data_ = static_cast<T*>(*ptr);
    return b;
  }
  ~TensorBuffer() { Reset(); }
  TensorBuffer(TensorBuffer&& other) noexcept { *this = std::move(other); }
  TensorBuffer& operator=(TensorBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      std::swap(memory_, other.memory_);
      std::swap(data_, other.data_);
      std::swap(count_, other.count_);
    }
    return *this;
  }
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  void Reset() {
    if (data_ != nullptr) memory_->Free(data_);
    data_ = nullptr;
    count_ = 0;
  }

 private:
  TensorMemory* memory_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

// Bytes a collective exchanges with the host side: host() is what the caller fills and reads;
// wire() is what the collective gets — host() itself for host-accessible memory (no copy),
// otherwise an allocation that Upload() / Download() copy to and from.
class StagedBytes {
 public:
  // Errors: Allocate's.
  static absl::StatusOr<StagedBytes> Create(TensorMemory* memory, size_t bytes);
  StagedBytes(StagedBytes&&) = default;
  StagedBytes& operator=(StagedBytes&&) = default;

  uint8_t* host() { return host_.data(); }
  size_t size() const { return host_.size(); }
  void* wire() { return staged_.data() != nullptr ? static_cast<void*>(staged_.data()) : host(); }
  TensorView view() { return TensorView{wire(), size(), DataType::kUInt8}; }
  // host() -> wire(), and back. No-ops when they are the same memory.
  absl::Status Upload();
  absl::Status Download();

 private:
  StagedBytes() = default;
  TensorMemory* memory_ = nullptr;
  std::vector<uint8_t> host_;
  TensorBuffer<uint8_t> staged_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_TENSOR_MEMORY_H_
