// The collective fingerprint ledger: every collective the gradient reducer (and the buffer
// broadcast and drift check, when given the ledger) issues is recorded as
// (sequence number, kind, bucket id, element count, dtype). Ranks compare what they recorded
// with a tiny all-gather of (step, record count, FNV-1a digest); on a mismatch they all-gather
// the records themselves, so every rank can name the first divergent collective and the ranks
// that disagree with rank 0.
//
// Why it exists: per-rank control flow that issues a different collective sequence either hangs
// (mismatched sizes), crashes the transport, or — worst — silently reduces bucket 3 on one rank
// with bucket 4 on another when they happen to have the same size. The ledger turns each into an
// error that names the culprit.
//
// The check itself is two collectives at most, identical on every rank by construction
// (fixed-size all-gather, then — only when the digests differ, which every rank sees alike — an
// all-gather of max_count records), so it cannot desynchronise the ranks it checks. Its own
// collectives are not recorded.
//
// Record wire format (32 bytes, little-endian): u64 sequence, u32 kind, i32 bucket, u64 count,
// u32 dtype, u32 zero padding. The digest is 64-bit FNV-1a over the encoded records.
#ifndef RINGLEADER_WORKER_SYNC_COLLECTIVE_LEDGER_H_
#define RINGLEADER_WORKER_SYNC_COLLECTIVE_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/tensor_memory.h"

namespace ringleader {


struct CollectiveRecord {
  uint64_t sequence = 0;  // per rank, 0-based, counts every recorded collective
  CollectiveKind kind = CollectiveKind::kNone;
  int32_t bucket = -1;    // bucket id, or a negative tag (see the kTag* constants)
  uint64_t count = 0;     // elements
  DataType dtype = DataType::kFloat32;

  friend bool operator==(const CollectiveRecord& a, const CollectiveRecord& b) {
    return a.sequence == b.sequence && a.kind == b.kind && a.bucket == b.bucket &&
           a.count == b.count && a.dtype == b.dtype;
  }
  friend bool operator!=(const CollectiveRecord& a, const CollectiveRecord& b) {
    return !(a == b);
  }
};

// Negative "bucket" ids of collectives that are not bucket all-reduces.
constexpr int32_t kTagNone = -1;
constexpr int32_t kTagUnusedBitmap = -2;   // reducer: who left which parameter unready
constexpr int32_t kTagLayoutOrder = -3;    // reducer: rank 0's bucket order after a rebuild
constexpr int32_t kTagBuffer = -4;         // buffer broadcast
constexpr int32_t kTagDrift = -5;          // drift check
constexpr int32_t kTagShardGather = -6;    // zero1: parameter shards all-gathered after a step
constexpr int32_t kTagMomentumGather = -7; // zero1: momentum shards gathered for a checkpoint
constexpr int32_t kTagZero2Stats = -8;     // zero2: unready count + gradient sum of squares

constexpr size_t kRecordWireBytes = 32;

// "#17 allreduce bucket 3, 262145 x fp32" (or "nothing" for kNone).
std::string DescribeRecord(const CollectiveRecord& r);

// 64-bit FNV-1a over the wire encoding of `records` (the empty list hashes to the FNV offset
// basis).
uint64_t DigestRecords(const std::vector<CollectiveRecord>& records);

void EncodeRecord(const CollectiveRecord& r, uint8_t* out);  // writes kRecordWireBytes
CollectiveRecord DecodeRecord(const uint8_t* in);

// Given every rank's records for the same window (rank order), returns "" when all agree, else
// a message naming the first divergent collective: its position, what rank 0 issued there, each
// rank that issued something else (a shorter list counts as "nothing"), and the ranks that
// agree with rank 0.
std::string DescribeFirstDivergence(int64_t step,
                                    const std::vector<std::vector<CollectiveRecord>>& per_rank);

// Appends records and hands out the window of records since the last check. Owned by the
// reducer (one per rank); thread-safe.
class CollectiveLedger {
 public:
  CollectiveLedger() = default;
  CollectiveLedger(const CollectiveLedger&) = delete;
  CollectiveLedger& operator=(const CollectiveLedger&) = delete;

  // Appends a record and returns it (with its sequence number).
  CollectiveRecord Record(CollectiveKind kind, int32_t bucket, size_t count, DataType dtype);
  // Moves out the records appended since the last TakeWindow(), oldest first.
  std::vector<CollectiveRecord> TakeWindow();
  // Total records appended since construction.
  uint64_t size() const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<CollectiveRecord> window_ ABSL_GUARDED_BY(mu_);
};

// One cross-rank comparison of a window of records. Start() issues the fixed-size all-gather
// (asynchronously); Finish() waits for it and, if the ranks disagree, issues the record
// all-gather and returns the error. Every rank must Start and Finish the same checks in the same
// order relative to its other collectives. Not thread-safe (one owner).
//
//   Start ──all-gather(step,count,digest)──> Finish ──all agree──> OK
//                                                   └─differ──> all-gather(records) ──> error
class LedgerCheck {
 public:
  // `comm` must outlive the check. The exchanged summaries and records are staged through
  // `memory` (null = host memory; not owned, must outlive the check), which must match the
  // collective's memory kind. A staging failure is returned by Finish (no collective issued).
  static std::unique_ptr<LedgerCheck> Start(Collective* comm, int64_t step,
                                            std::vector<CollectiveRecord> window,
                                            absl::Duration timeout,
                                            TensorMemory* memory = nullptr);
  ~LedgerCheck();

  // Idempotent. Errors: FAILED_PRECONDITION "collective desync at step S: ..." naming the first
  // divergent collective and the ranks (also for a rank checking a different step number);
  // whatever the collectives returned (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED).
  absl::Status Finish();

 private:
  LedgerCheck(Collective* comm, int64_t step, std::vector<CollectiveRecord> window,
              absl::Duration timeout, TensorMemory* memory);
  absl::Status StartSummary();
  absl::Status FinishOnce();

  Collective* comm_;
  int64_t step_;
  std::vector<CollectiveRecord> window_;
  absl::Duration timeout_;
  TensorMemory* memory_;
  absl::Status start_error_;
  std::unique_ptr<StagedBytes> summary_in_;
  std::unique_ptr<StagedBytes> summary_out_;
  std::shared_ptr<Work> summary_work_;
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_COLLECTIVE_LEDGER_H_
