// The shared-memory segment under ShmCollective (shm_collective.h): its layout, mapping, and the
// one synchronisation primitive the operations need — a counting barrier over per-rank counters
// in the segment, woken through a futex on a shared "bell" word — plus the cross-process abort.
//
// Layout (offsets fixed by world size and slot size, identical in every process):
//
//   0                 Header (magic, token, world size, slot bytes, bell, waiters, aborted_by)
//   kHeaderBytes      RankBlock[world_size] (arrived, pid, abort reason), 64-byte aligned each
//   SlotsOffset()     slot[0] .. slot[world_size-1], slot_bytes each, page aligned; a slot is
//                     two halves (half 0, half 1) used by alternating chunks
//
// Thread-safety: one thread per process runs Arrive/Await (the communication thread); Abort,
// AbortedBy and the accessors may be called from any thread.
#ifndef RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_SEGMENT_H_
#define RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ringleader {

class ShmSegment {
 public:
  // Creates `name` (O_EXCL, mode 0600), sizes it for `world_size` slots of `slot_bytes` and
  // initialises the header with `token`. Errors: UNAVAILABLE (shm_open/ftruncate/mmap failed,
  // with the errno text).
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(const std::string& name,
                                                           int world_size, size_t slot_bytes,
                                                           uint64_t token_hi, uint64_t token_lo,
                                                           int rank);
  // Maps an existing segment and checks it is the one announced (size, magic, token, world size).
  // Errors: NOT_FOUND (no such name here: another host or /dev/shm), PERMISSION_DENIED,
  // FAILED_PRECONDITION (a different segment), UNAVAILABLE (other system errors).
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, int world_size,
                                                         size_t slot_bytes, uint64_t token_hi,
                                                         uint64_t token_lo, int rank);
  // Bytes a segment for these figures occupies.
  static size_t SizeFor(int world_size, size_t slot_bytes);
  // Removes the name (mappings stay valid). Errors are ignored: a missing name is fine.
  static void Unlink(const std::string& name);

  ~ShmSegment();  // unmaps
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  size_t half_bytes() const { return slot_bytes_ / 2; }
  // Half `half` (0 or 1) of rank `r`'s slot.
  char* Half(int r, int half) const;

  // Marks this rank as arrived at its next barrier and wakes the waiters; returns the barrier's
  // number (1, 2, ...).
  uint64_t Arrive();
  // Waits until every rank arrived at barrier `number`. Errors: ABORTED (this rank aborted:
  // `own_abort`), UNAVAILABLE (another rank aborted, quoting its reason: RankFailure
  // ABORTED_BY_PEER naming it; or a rank's process is gone: PEER_CLOSED naming it),
  // DEADLINE_EXCEEDED (`deadline` on `clock` passed; names the ranks missing: PEER_TIMED_OUT).
  // `what` prefixes the message; the failures are common/rank_failure.h payloads.
  absl::Status Await(uint64_t number, absl::Time deadline, Clock* clock, const std::string& what,
                     const absl::Status& own_abort) const;
  // Tells every rank (their Await returns UNAVAILABLE with `reason`) and wakes them. The first
  // abort of the segment wins; later ones only wake.
  void Abort(const std::string& reason);
  // The rank whose abort was first, or -1 while none.
  int AbortedBy() const;

 private:
  struct Header;
  struct RankBlock;

  ShmSegment(void* base, size_t size, int rank, int world_size, size_t slot_bytes);
  Header* header() const;
  RankBlock* block(int r) const;
  void Ring() const;
  // UNAVAILABLE when a rank among those not arrived at `number` has no process any more (only
  // ranks in this process's pid namespace are checked).
  absl::Status CheckPeersAlive(uint64_t number, const std::string& what) const;

  void* const base_;
  const size_t size_;
  const int rank_;
  const int world_size_;
  const size_t slot_bytes_;
  uint64_t arrived_ = 0;  // barriers this rank arrived at (communication thread only)
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_SHM_SHM_SEGMENT_H_
