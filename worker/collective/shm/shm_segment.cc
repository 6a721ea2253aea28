#include "worker/collective/shm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rank_failure.h"

namespace ringleader {
namespace {

constexpr uint64_t kMagic = 0x31306d68736c7200;  // "\0rlshm01"
constexpr size_t kHeaderBytes = 256;
constexpr size_t kBlockBytes = 384;
constexpr size_t kPage = 4096;
constexpr size_t kReasonBytes = 256;
// Busy-wait this many rounds before sleeping on the futex: a peer on another core usually
// arrives within microseconds, and a futex sleep plus wake costs more than that.
constexpr int kSpinRounds = 4000;
// How long one futex sleep lasts at most, so deadlines, aborts and dead peers are noticed even
// without a wake.
constexpr absl::Duration kSleepSlice = absl::Milliseconds(20);
// How often a waiting rank checks that the ranks it waits for still have a process.
constexpr absl::Duration kLivenessInterval = absl::Milliseconds(100);

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex word must be lock-free");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be lock-free");

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

absl::Status ErrnoStatus(const std::string& what, int err) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(text);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(text);
    default:
      return absl::UnavailableError(text);
  }
}

// This process's pid namespace (the inode of /proc/self/ns/pid), 0 when unknown.
uint64_t PidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

struct ShmSegment::Header {
  uint64_t magic;
  uint64_t token_hi;
  uint64_t token_lo;
  uint32_t world_size;
  uint32_t reserved;
  uint64_t slot_bytes;
  alignas(64) std::atomic<uint32_t> bell;  // futex word: bumped on every arrival and abort
  std::atomic<uint32_t> waiters;           // processes sleeping (or about to) on the bell
  std::atomic<int32_t> aborted_by;         // -1 while live
};

struct ShmSegment::RankBlock {
  alignas(64) std::atomic<uint64_t> arrived;
  std::atomic<int32_t> pid;
  // The inode of the rank's pid namespace: its pid means something to a peer only in the same
  // namespace (containers may share /dev/shm but not pids).
  std::atomic<uint64_t> pid_namespace;
  char abort_reason[kReasonBytes];  // written before aborted_by names this rank
};

size_t ShmSegment::SizeFor(int world_size, size_t slot_bytes) {
  static_assert(sizeof(Header) <= kHeaderBytes, "header outgrew its space");
  static_assert(sizeof(RankBlock) <= kBlockBytes, "rank block outgrew its space");
  return RoundUp(kHeaderBytes + kBlockBytes * static_cast<size_t>(world_size), kPage) +
         slot_bytes * static_cast<size_t>(world_size);
}

ShmSegment::ShmSegment(void* base, size_t size, int rank, int world_size, size_t slot_bytes)
    : base_(base), size_(size), rank_(rank), world_size_(world_size), slot_bytes_(slot_bytes) {
  block(rank_)->pid_namespace.store(PidNamespace(), std::memory_order_relaxed);
  block(rank_)->pid.store(static_cast<int32_t>(getpid()), std::memory_order_release);
}

ShmSegment::~ShmSegment() { munmap(base_, size_); }

ShmSegment::Header* ShmSegment::header() const { return static_cast<Header*>(base_); }

ShmSegment::RankBlock* ShmSegment::block(int r) const {
  return reinterpret_cast<RankBlock*>(static_cast<char*>(base_) + kHeaderBytes +
                                      kBlockBytes * static_cast<size_t>(r));
}

char* ShmSegment::Half(int r, int half) const {
  const size_t slots =
      RoundUp(kHeaderBytes + kBlockBytes * static_cast<size_t>(world_size_), kPage);
  return static_cast<char*>(base_) + slots + slot_bytes_ * static_cast<size_t>(r) +
         (half == 0 ? 0 : slot_bytes_ / 2);
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name,
                                                              int world_size, size_t slot_bytes,
                                                              uint64_t token_hi,
                                                              uint64_t token_lo, int rank) {
  const size_t size = SizeFor(world_size, slot_bytes);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("shm_open ", name), errno);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return ErrnoStatus(absl::StrCat("ftruncate ", name, " to ", size, " bytes"), err);
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return ErrnoStatus(absl::StrCat("mmap ", name), err);
  }
  // The file is zero-filled; construct the atomics in place before anyone else maps it.
  auto* h = new (base) Header();
  h->token_hi = token_hi;
  h->token_lo = token_lo;
  h->world_size = static_cast<uint32_t>(world_size);
  h->slot_bytes = slot_bytes;
  h->bell.store(0);
  h->waiters.store(0);
  h->aborted_by.store(-1);
  for (int r = 0; r < world_size; ++r) {
    new (static_cast<char*>(base) + kHeaderBytes + kBlockBytes * static_cast<size_t>(r))
        RankBlock();
  }
  // Published last: a peer that sees the magic sees an initialised header.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return std::unique_ptr<ShmSegment>(new ShmSegment(base, size, rank, world_size, slot_bytes));
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name,
                                                            int world_size, size_t slot_bytes,
                                                            uint64_t token_hi, uint64_t token_lo,
                                                            int rank) {
  const size_t size = SizeFor(world_size, slot_bytes);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(absl::StrCat("shm_open ", name), errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is ", static_cast<long long>(st.st_size), " bytes, not the ", size, " announced"));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap ", name), err);
  std::atomic_thread_fence(std::memory_order_acquire);
  const auto* h = static_cast<const Header*>(base);
  if (h->magic != kMagic || h->token_hi != token_hi || h->token_lo != token_lo ||
      h->world_size != static_cast<uint32_t>(world_size) || h->slot_bytes != slot_bytes) {
    munmap(base, size);
    return absl::FailedPreconditionError(
        absl::StrCat(name, " is not the segment rank 0 announced (token or shape differ)"));
  }
  return std::unique_ptr<ShmSegment>(new ShmSegment(base, size, rank, world_size, slot_bytes));
}

void ShmSegment::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

void ShmSegment::Ring() const {
  header()->bell.fetch_add(1, std::memory_order_seq_cst);
  if (header()->waiters.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header()->bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

uint64_t ShmSegment::Arrive() {
  ++arrived_;
  block(rank_)->arrived.store(arrived_, std::memory_order_release);
  Ring();
  return arrived_;
}

int ShmSegment::AbortedBy() const {
  return header()->aborted_by.load(std::memory_order_acquire);
}

void ShmSegment::Abort(const std::string& reason) {
  RankBlock* mine = block(rank_);
  const size_t n = std::min(reason.size(), kReasonBytes - 1);
  std::memcpy(mine->abort_reason, reason.data(), n);
  mine->abort_reason[n] = '\0';
  int32_t live = -1;
  header()->aborted_by.compare_exchange_strong(live, rank_, std::memory_order_acq_rel);
  Ring();
}

absl::Status ShmSegment::CheckPeersAlive(uint64_t number, const std::string& what) const {
  for (int r = 0; r < world_size_; ++r) {
    if (block(r)->arrived.load(std::memory_order_acquire) >= number) continue;
    const int32_t pid = block(r)->pid.load(std::memory_order_acquire);
    const uint64_t ns = block(r)->pid_namespace.load(std::memory_order_relaxed);
    const bool same_namespace = ns != 0 && ns == block(rank_)->pid_namespace.load();
    if (pid > 0 && same_namespace && kill(pid, 0) != 0 && errno == ESRCH) {
      return WithFailureKind(
          absl::UnavailableError(
              absl::StrCat(what, ": peer rank ", r, " (pid ", pid,
                           ") is gone: its process exited while the others waited for it")),
          v1::RankFailure::PEER_CLOSED, r);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmSegment::Await(uint64_t number, absl::Time deadline, Clock* clock,
                               const std::string& what, const absl::Status& own_abort) const {
  int spins = 0;
  absl::Time next_liveness_check = absl::InfinitePast();
  for (;;) {
    const uint32_t bell = header()->bell.load(std::memory_order_acquire);
    const int aborted_by = AbortedBy();
    if (aborted_by == rank_) {
      return own_abort.ok() ? absl::AbortedError(absl::StrCat(what, ": aborted")) : own_abort;
    }
    if (aborted_by >= 0) {
      return WithFailureKind(absl::UnavailableError(absl::StrCat(
                                 what, ": peer rank ", aborted_by, " aborted the collective: ",
                                 block(aborted_by)->abort_reason)),
                             v1::RankFailure::ABORTED_BY_PEER, aborted_by);
    }
    bool all = true;
    for (int r = 0; r < world_size_ && all; ++r) {
      all = block(r)->arrived.load(std::memory_order_acquire) >= number;
    }
    if (all) return absl::OkStatus();
    if (spins < kSpinRounds) {
      ++spins;
      CpuRelax();
      continue;
    }
    const absl::Time now = clock->Now();
    if (now >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < world_size_; ++r) {
        if (block(r)->arrived.load(std::memory_order_acquire) < number) missing.push_back(r);
      }
      return WithFailureKind(
          absl::DeadlineExceededError(absl::StrCat(
              what, ": timed out waiting for rank", missing.size() == 1 ? " " : "s ",
              absl::StrJoin(missing, ", "),
              " to reach the same operation (stopped, frozen, or far behind)")),
          v1::RankFailure::PEER_TIMED_OUT);
    }
    if (now >= next_liveness_check) {
      absl::Status alive = CheckPeersAlive(number, what);
      if (!alive.ok()) return alive;
      next_liveness_check = now + kLivenessInterval;
    }
    const absl::Duration sleep = std::min(kSleepSlice, deadline - now);
    struct timespec ts = absl::ToTimespec(sleep);
    header()->waiters.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header()->bell), FUTEX_WAIT, bell, &ts,
            nullptr, 0);
    header()->waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace ringleader
