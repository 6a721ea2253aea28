#include "worker/sync/tensor_memory.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/status_macros.h"
#include "worker/sync/drift_math.h"

namespace ringleader {
namespace {

const char* KindName(MemoryKind kind) {
  return kind == MemoryKind::kHost ? "host memory" : "device memory";
}

// Host memory: every operation is the plain loop or libc call the reducer used before the seam
// existed, so the gloo path pays nothing for it.
class HostTensorMemory : public TensorMemory {
 public:
  MemoryKind kind() const override { return MemoryKind::kHost; }
  bool host_accessible() const override { return true; }
  std::string name() const override { return "host"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = ::operator new(bytes, std::nothrow);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host memory: cannot allocate ", bytes, " bytes"));
    }
    return p;
  }
  void Free(void* ptr) override { ::operator delete(ptr); }

  absl::Status Zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CastToBf16(const float* src, uint16_t* dst, size_t count) override {
    for (size_t i = 0; i < count; ++i) dst[i] = FloatToBf16(src[i]);
    return absl::OkStatus();
  }
  absl::Status CastFromBf16(const uint16_t* src, float* dst, size_t count) override {
    for (size_t i = 0; i < count; ++i) dst[i] = Bf16ToFloat(src[i]);
    return absl::OkStatus();
  }
  absl::Status MaxAbsDiff(const std::vector<const float*>& a, const std::vector<const float*>& b,
                          const std::vector<size_t>& counts, std::vector<double>* out) override {
    out->assign(counts.size(), 0.0);
    for (size_t t = 0; t < counts.size(); ++t) {
      double worst = 0;
      for (size_t i = 0; i < counts[t]; ++i)
        worst = MaxKeepingNan(worst, AbsDiff(a[t][i], b[t][i]));
      (*out)[t] = worst;
    }
    return absl::OkStatus();
  }
  absl::Status Add(float* dst, const float* src, size_t count) override {
    for (size_t k = 0; k < count; ++k) dst[k] += src[k];
    return absl::OkStatus();
  }
  absl::Status SquaredSum(const float* src, size_t count, double* out) override {
    double sum = 0;
    for (size_t k = 0; k < count; ++k) sum += static_cast<double>(src[k]) * src[k];
    *out = sum;
    return absl::OkStatus();
  }
};

}  // namespace

TensorMemory* HostMemory() {
  static TensorMemory* const memory = new HostTensorMemory();
  return memory;
}

absl::Status CheckMemoryMatches(const Collective& comm, const TensorMemory* memory,
                                const char* who) {
  const MemoryKind kind = memory != nullptr ? memory->kind() : MemoryKind::kHost;
  if (kind == comm.memory_kind()) return absl::OkStatus();
  const std::string what = memory != nullptr ? memory->name() : "the default host memory";
  return absl::InvalidArgumentError(absl::StrCat(
      who, ": backend '", comm.backend_name(), "' works on ", KindName(comm.memory_kind()),
      " but its working memory is ", KindName(kind), " (", what,
      "): pass the trainer's TensorMemory for that backend (for NCCL, the GPU runner's device "
      "memory)"));
}

absl::StatusOr<StagedBytes> StagedBytes::Create(TensorMemory* memory, size_t bytes) {
  StagedBytes s;
  s.memory_ = memory;
  s.host_.assign(bytes, 0);
  if (!memory->host_accessible() && bytes > 0) {
    ASSIGN_OR_RETURN(s.staged_, TensorBuffer<uint8_t>::Allocate(memory, bytes));
  }
  return s;
}

absl::Status StagedBytes::Upload() {
  if (staged_.data() == nullptr) return absl::OkStatus();
  return memory_->CopyFromHost(staged_.data(), host_.data(), host_.size());
}

absl::Status StagedBytes::Download() {
  if (staged_.data() == nullptr) return absl::OkStatus();
  return memory_->CopyToHost(host_.data(), staged_.data(), host_.size());
}

}  // namespace ringleader
