#include "worker/sync/recording_tensor_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace sync_test {
namespace {

size_t PageBytes(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return ((bytes == 0 ? 1 : bytes) + page - 1) / page * page;
}

void Protect(const uint8_t* p, size_t bytes, int prot) {
  if (mprotect(const_cast<uint8_t*>(p), PageBytes(bytes), prot) != 0) {
    std::perror("RecordingTensorMemory: mprotect");
    std::abort();
  }
}

}  // namespace

RecordingTensorMemory::RecordingTensorMemory(MemoryKind kind, bool guard)
    : kind_(kind), guard_(guard) {}

RecordingTensorMemory::~RecordingTensorMemory() {
  absl::MutexLock lock(&mu_);
  for (const auto& [p, bytes] : sizes_) munmap(const_cast<uint8_t*>(p), PageBytes(bytes));
}

void RecordingTensorMemory::OpenLocked() {
  if (!guard_) return;
  for (const auto& [p, bytes] : sizes_) Protect(p, bytes, PROT_READ | PROT_WRITE);
}

void RecordingTensorMemory::CloseLocked() {
  if (!guard_) return;
  for (const auto& [p, bytes] : sizes_) Protect(p, bytes, PROT_NONE);
}

void RecordingTensorMemory::Note(Op op) { ++counts_[op]; }

// Only accesses through this class (or WithAccess) ever find the pool's pages readable.
absl::Status RecordingTensorMemory::OpenedLocked(const std::function<absl::Status()>& op) {
  OpenLocked();
  absl::Status s = op();
  CloseLocked();
  return s;
}

bool RecordingTensorMemory::ContainsLocked(const void* p, size_t bytes) const {
  const uint8_t* begin = static_cast<const uint8_t*>(p);
  auto it = sizes_.upper_bound(begin);
  if (it == sizes_.begin()) return false;
  --it;
  return begin >= it->first && begin + bytes <= it->first + it->second;
}

bool RecordingTensorMemory::CheckRangeLocked(const void* p, size_t bytes, const char* what) {
  if (ContainsLocked(p, bytes)) return true;
  violations_.push_back(absl::StrCat(what, ": [", reinterpret_cast<uintptr_t>(p), ", +", bytes,
                                     ") is not inside a live allocation of this memory"));
  return false;
}

absl::Status RecordingTensorMemory::RefusedLocked() const {
  return absl::InternalError(absl::StrCat("recording test memory refused: ", violations_.back()));
}

bool RecordingTensorMemory::Contains(const void* p, size_t bytes) const {
  absl::MutexLock lock(&mu_);
  return ContainsLocked(p, bytes);
}

void RecordingTensorMemory::WithAccess(const std::function<void()>& fn) {
  absl::MutexLock lock(&mu_);
  OpenLocked();
  fn();
  CloseLocked();
}

absl::StatusOr<void*> RecordingTensorMemory::Allocate(size_t bytes) {
  absl::MutexLock lock(&mu_);
  Note(Op::kAllocate);
  if (bytes == 0) violations_.push_back("Allocate(0)");
  void* p =
      mmap(nullptr, PageBytes(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return absl::ResourceExhaustedError("RecordingTensorMemory: mmap failed");
  std::memset(p, 0xFF, bytes);  // every float reads as NaN until written
  if (guard_) Protect(static_cast<uint8_t*>(p), bytes, PROT_NONE);
  sizes_[static_cast<const uint8_t*>(p)] = bytes;
  return p;
}

void RecordingTensorMemory::Free(void* ptr) {
  if (ptr == nullptr) return;
  absl::MutexLock lock(&mu_);
  Note(Op::kFree);
  auto it = sizes_.find(static_cast<const uint8_t*>(ptr));
  if (it == sizes_.end()) {
    violations_.push_back(
        absl::StrCat("Free of an unknown pointer ", reinterpret_cast<uintptr_t>(ptr)));
    return;
  }
  munmap(ptr, PageBytes(it->second));
  sizes_.erase(it);
}

absl::Status RecordingTensorMemory::Zero(void* dst, size_t bytes) {
  absl::MutexLock lock(&mu_);
  Note(Op::kZero);
  if (!CheckRangeLocked(dst, bytes, "Zero")) return RefusedLocked();
  return OpenedLocked([&] { return HostMemory()->Zero(dst, bytes); });
}

absl::Status RecordingTensorMemory::CopyFromHost(void* dst, const void* src, size_t bytes) {
  absl::MutexLock lock(&mu_);
  Note(Op::kCopyFromHost);
  if (!CheckRangeLocked(dst, bytes, "CopyFromHost destination")) return RefusedLocked();
  return OpenedLocked([&] { return HostMemory()->CopyFromHost(dst, src, bytes); });
}

absl::Status RecordingTensorMemory::CopyToHost(void* dst, const void* src, size_t bytes) {
  absl::MutexLock lock(&mu_);
  Note(Op::kCopyToHost);
  if (!CheckRangeLocked(src, bytes, "CopyToHost source")) return RefusedLocked();
  return OpenedLocked([&] { return HostMemory()->CopyToHost(dst, src, bytes); });
}

absl::Status RecordingTensorMemory::Copy(void* dst, const void* src, size_t bytes) {
  absl::MutexLock lock(&mu_);
  Note(Op::kCopy);
  const bool dst_ok = CheckRangeLocked(dst, bytes, "Copy destination");
  if (!CheckRangeLocked(src, bytes, "Copy source") || !dst_ok) return RefusedLocked();
  return OpenedLocked([&] { return HostMemory()->Copy(dst, src, bytes); });
}

absl::Status RecordingTensorMemory::CastToBf16(const float* src, uint16_t* dst, size_t count) {
  absl::MutexLock lock(&mu_);
  Note(Op::kCastToBf16);
  const bool src_ok = CheckRangeLocked(src, count * sizeof(float), "CastToBf16 source");
  if (!CheckRangeLocked(dst, count * sizeof(uint16_t), "CastToBf16 destination") || !src_ok) {
    return RefusedLocked();
  }
  return OpenedLocked([&] { return HostMemory()->CastToBf16(src, dst, count); });
}

absl::Status RecordingTensorMemory::CastFromBf16(const uint16_t* src, float* dst, size_t count) {
  absl::MutexLock lock(&mu_);
  Note(Op::kCastFromBf16);
  const bool src_ok = CheckRangeLocked(src, count * sizeof(uint16_t), "CastFromBf16 source");
  if (!CheckRangeLocked(dst, count * sizeof(float), "CastFromBf16 destination") || !src_ok) {
    return RefusedLocked();
  }
  return OpenedLocked([&] { return HostMemory()->CastFromBf16(src, dst, count); });
}

absl::Status RecordingTensorMemory::MaxAbsDiff(const std::vector<const float*>& a,
                                               const std::vector<const float*>& b,
                                               const std::vector<size_t>& counts,
                                               std::vector<double>* out) {
  absl::MutexLock lock(&mu_);
  Note(Op::kMaxAbsDiff);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    if (!CheckRangeLocked(a[i], counts[i] * sizeof(float), "MaxAbsDiff a") ||
        !CheckRangeLocked(b[i], counts[i] * sizeof(float), "MaxAbsDiff b")) {
      return RefusedLocked();
    }
  }
  return OpenedLocked([&] { return HostMemory()->MaxAbsDiff(a, b, counts, out); });
}

absl::Status RecordingTensorMemory::SquaredSum(const float* src, size_t count, double* out) {
  absl::MutexLock lock(&mu_);
  Note(Op::kSquaredSum);
  if (count > 0 && !CheckRangeLocked(src, count * sizeof(float), "SquaredSum source")) {
    return RefusedLocked();
  }
  return OpenedLocked([&] { return HostMemory()->SquaredSum(src, count, out); });
}

absl::Status RecordingTensorMemory::Add(float* dst, const float* src, size_t count) {
  absl::MutexLock lock(&mu_);
  Note(Op::kAdd);
  if (count > 0 && (!CheckRangeLocked(dst, count * sizeof(float), "Add destination") ||
                    !CheckRangeLocked(src, count * sizeof(float), "Add source"))) {
    return RefusedLocked();
  }
  return OpenedLocked([&] { return HostMemory()->Add(dst, src, count); });
}

size_t RecordingTensorMemory::count(Op op) const {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

std::vector<std::string> RecordingTensorMemory::violations() const {
  absl::MutexLock lock(&mu_);
  return violations_;
}

size_t RecordingTensorMemory::live_allocations() const {
  absl::MutexLock lock(&mu_);
  return sizes_.size();
}

}  // namespace sync_test
}  // namespace ringleader
