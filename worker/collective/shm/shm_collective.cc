#include "worker/collective/shm/shm_collective.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "worker/collective/collective_util.h"
#include "worker/collective/host_ops.h"
#include "worker/collective/shm/shm_segment.h"

namespace ringleader {
namespace {

constexpr size_t kSlotAlignment = 8192;

// Elements [lo, hi) of a chunk of `count` that rank `r` of `n` reduces.
inline size_t PartBegin(size_t count, int r, int n) {
  return count * static_cast<size_t>(r) / static_cast<size_t>(n);
}

class ShmCollective : public Collective {
 public:
  ShmCollective(std::unique_ptr<ShmSegment> segment, const ShmOptions& opts)
      : segment_(std::move(segment)),
        rank_(segment_->rank()),
        world_size_(segment_->world_size()),
        default_timeout_(opts.collective_timeout),
        clock_(opts.clock != nullptr ? opts.clock : Clock::Real()),
        thread_([this] { CommLoop(); }) {}

  ~ShmCollective() override {
    Abort(absl::AbortedError("shared-memory collective destroyed"));
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return "shm"; }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }

  std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                  const CollectiveOptions& opts) override {
    return Enqueue(absl::StrFormat("all_reduce(%s, %s)", ReduceOpName(op), DataTypeName(buf.dtype)),
                   opts, buf.count, ValidateAllReduce(buf, op),
                   [this, buf, op](absl::Time deadline, const std::string& what) {
                     return RunAllReduce(buf, op, deadline, what);
                   });
  }

  std::shared_ptr<Work> Broadcast(TensorView buf, int root,
                                  const CollectiveOptions& opts) override {
    return Enqueue(absl::StrFormat("broadcast(root %d, %s)", root, DataTypeName(buf.dtype)), opts,
                   buf.count, ValidateBroadcast(buf, root, world_size_),
                   [this, buf, root](absl::Time deadline, const std::string& what) {
                     return RunBroadcast(buf, root, deadline, what);
                   });
  }

  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override {
    return Enqueue(absl::StrFormat("all_gather(%s)", DataTypeName(in.dtype)), opts, in.count,
                   ValidateAllGather(in, out, world_size_),
                   [this, in, out](absl::Time deadline, const std::string& what) {
                     return RunAllGather(in, out, deadline, what);
                   });
  }

  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts) override {
    return Enqueue(
        absl::StrFormat("reduce_scatter(%s, %s)", ReduceOpName(op), DataTypeName(in.dtype)), opts,
        out.count, ValidateReduceScatter(in, out, op, world_size_),
        [this, in, out, op](absl::Time deadline, const std::string& what) {
          return RunReduceScatter(in, out, op, deadline, what);
        });
  }

  std::shared_ptr<Work> Barrier(const CollectiveOptions& opts) override {
    return Enqueue(
        "barrier", opts, 0, absl::OkStatus(),
        [this](absl::Time deadline, const std::string& what) { return Sync(deadline, what); },
        /*runs_when_empty=*/true);
  }

  absl::Status Close(absl::Duration timeout) override {
    CollectiveOptions opts;
    opts.timeout = timeout;
    RETURN_IF_ERROR(Barrier(opts)->Wait());
    absl::MutexLock lock(&mu_);
    closed_ = true;
    dead_ = absl::FailedPreconditionError(
        absl::StrCat("shm rank ", rank_, "/", world_size_, " closed"));
    return absl::OkStatus();
  }

  void Abort(const absl::Status& reason) override {
    std::deque<Op> cancelled;
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (!dead_.ok() && (closed_ || aborted_)) return;
      aborted_ = true;
      dead_ = absl::AbortedError(
          absl::StrCat("shm rank ", rank_, "/", world_size_, " aborted: ",
                       reason.ok() ? std::string("no reason given") : reason.ToString()));
      status = dead_;
      own_abort_ = dead_;
      cancelled.swap(queue_);
    }
    // Wakes this rank's communication thread and every peer's.
    segment_->Abort(reason.ok() ? std::string("no reason given") : reason.ToString());
    for (Op& op : cancelled) op.work->Finish(status, absl::ZeroDuration());
  }

 private:
  using RunFn = std::function<absl::Status(absl::Time deadline, const std::string& what)>;

  struct Op {
    std::string description;  // "shm rank 1/4 all_reduce(avg, fp32) bucket 3 count 1000"
    std::shared_ptr<FinishableWork> work;
    RunFn run;
    absl::Duration timeout;
    bool skip = false;  // no elements: nothing to exchange
  };

  std::shared_ptr<Work> Enqueue(const std::string& what, const CollectiveOptions& opts,
                                size_t count, const absl::Status& valid, RunFn run,
                                bool runs_when_empty = false) {
    const std::string description =
        DescribeOperation("shm", rank_, world_size_, what, opts.bucket, count);
    if (auto refused = RefuseInvalid(description, valid, opts.timeout)) return refused;
    auto work = std::make_shared<FinishableWork>();
    Op op;
    op.description = description;
    op.work = work;
    op.run = std::move(run);
    op.timeout = opts.timeout > absl::ZeroDuration() ? opts.timeout : default_timeout_;
    op.skip = count == 0 && !runs_when_empty;
    absl::MutexLock lock(&mu_);
    if (!dead_.ok()) {
      work->Finish(dead_, absl::ZeroDuration());
      return work;
    }
    queue_.push_back(std::move(op));
    return work;
  }

  void CommLoop() {
    for (;;) {
      Op op;
      absl::Status dead;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
        dead = dead_;
      }
      if (!dead.ok()) {
        op.work->Finish(dead, absl::ZeroDuration());
        continue;
      }
      const absl::Time start = clock_->Now();
      op.work->Start(start);
      absl::Status status = op.skip ? absl::OkStatus() : op.run(start + op.timeout, op.description);
      const absl::Duration duration = clock_->Now() - start;
      {
        absl::MutexLock lock(&mu_);
        if (aborted_) {
          status = dead_;
        } else if (!status.ok() && dead_.ok()) {
          dead_ = status;  // the peers are out of step now: the first error kills it
        }
      }
      op.work->Finish(std::move(status), duration);
    }
  }

  // Arrives at the next barrier and waits for every rank.
  absl::Status Sync(absl::Time deadline, const std::string& what) {
    absl::Status own_abort;
    {
      absl::MutexLock lock(&mu_);
      own_abort = own_abort_;
    }
    return segment_->Await(segment_->Arrive(), deadline, clock_, what, own_abort);
  }

  // The half of the slots the next chunk uses (alternating, the same on every rank).
  int NextHalf() { return static_cast<int>(chunks_++ & 1); }

  // Reduces elements [lo, hi) of the chunk in `half` over every rank's slot, in rank order,
  // into `dst` (and divides for kAvg).
  void ReduceRange(int half, size_t lo, size_t hi, DataType dtype, ReduceOp op, char* dst) const {
    const size_t esz = DataTypeSize(dtype);
    const size_t n = hi - lo;
    if (n == 0) return;
    const PairwiseFn fn = PairwiseReduction(dtype, op);
    if (world_size_ == 1) {
      std::memmove(dst, segment_->Half(0, half) + lo * esz, n * esz);
    } else {
      fn(dst, segment_->Half(0, half) + lo * esz, segment_->Half(1, half) + lo * esz, n);
      for (int r = 2; r < world_size_; ++r) fn(dst, dst, segment_->Half(r, half) + lo * esz, n);
    }
    if (op == ReduceOp::kAvg) DivideInPlace(dst, n, dtype, world_size_);
  }

  absl::Status RunAllReduce(TensorView buf, ReduceOp op, absl::Time deadline,
                            const std::string& what) {
    const size_t esz = DataTypeSize(buf.dtype);
    const size_t per_chunk = std::max<size_t>(1, segment_->half_bytes() / esz);
    char* data = static_cast<char*>(buf.data);
    for (size_t off = 0; off < buf.count; off += per_chunk) {
      const size_t c = std::min(per_chunk, buf.count - off);
      const int half = NextHalf();
      char* mine = segment_->Half(rank_, half);
      std::memcpy(mine, data + off * esz, c * esz);
      RETURN_IF_ERROR(Sync(deadline, what));
      const size_t lo = PartBegin(c, rank_, world_size_);
      const size_t hi = PartBegin(c, rank_ + 1, world_size_);
      ReduceRange(half, lo, hi, buf.dtype, op, data + (off + lo) * esz);
      std::memcpy(mine + lo * esz, data + (off + lo) * esz, (hi - lo) * esz);
      RETURN_IF_ERROR(Sync(deadline, what));
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_) continue;
        const size_t rlo = PartBegin(c, r, world_size_);
        const size_t rhi = PartBegin(c, r + 1, world_size_);
        std::memcpy(data + (off + rlo) * esz, segment_->Half(r, half) + rlo * esz,
                    (rhi - rlo) * esz);
      }
    }
    return absl::OkStatus();
  }

  absl::Status RunBroadcast(TensorView buf, int root, absl::Time deadline,
                            const std::string& what) {
    const size_t bytes = buf.bytes();
    const size_t per_chunk = segment_->half_bytes();
    char* data = static_cast<char*>(buf.data);
    for (size_t off = 0; off < bytes; off += per_chunk) {
      const size_t c = std::min(per_chunk, bytes - off);
      const int half = NextHalf();
      if (rank_ == root) std::memcpy(segment_->Half(root, half), data + off, c);
      RETURN_IF_ERROR(Sync(deadline, what));
      if (rank_ != root) std::memcpy(data + off, segment_->Half(root, half), c);
    }
    return absl::OkStatus();
  }

  absl::Status RunAllGather(TensorView in, TensorView out, absl::Time deadline,
                            const std::string& what) {
    const size_t bytes = in.bytes();
    const size_t per_chunk = segment_->half_bytes();
    const char* src = static_cast<const char*>(in.data);
    char* dst = static_cast<char*>(out.data);
    for (size_t off = 0; off < bytes; off += per_chunk) {
      const size_t c = std::min(per_chunk, bytes - off);
      const int half = NextHalf();
      std::memcpy(segment_->Half(rank_, half), src + off, c);
      RETURN_IF_ERROR(Sync(deadline, what));
      for (int r = 0; r < world_size_; ++r) {
        std::memcpy(dst + static_cast<size_t>(r) * bytes + off, segment_->Half(r, half), c);
      }
    }
    return absl::OkStatus();
  }

  // Each chunk carries the same element range of every destination rank's slice, packed.
  absl::Status RunReduceScatter(TensorView in, TensorView out, ReduceOp op, absl::Time deadline,
                                const std::string& what) {
    const size_t esz = DataTypeSize(in.dtype);
    const size_t m = out.count;
    const size_t per_chunk =
        std::max<size_t>(1, segment_->half_bytes() / (esz * static_cast<size_t>(world_size_)));
    const char* src = static_cast<const char*>(in.data);
    char* dst = static_cast<char*>(out.data);
    for (size_t off = 0; off < m; off += per_chunk) {
      const size_t c = std::min(per_chunk, m - off);
      const int half = NextHalf();
      char* mine = segment_->Half(rank_, half);
      for (int s = 0; s < world_size_; ++s) {
        std::memcpy(mine + static_cast<size_t>(s) * c * esz,
                    src + (static_cast<size_t>(s) * m + off) * esz, c * esz);
      }
      RETURN_IF_ERROR(Sync(deadline, what));
      const size_t lo = static_cast<size_t>(rank_) * c;
      ReduceRange(half, lo, lo + c, in.dtype, op, dst + off * esz);
    }
    return absl::OkStatus();
  }

  const std::unique_ptr<ShmSegment> segment_;
  const int rank_;
  const int world_size_;
  const absl::Duration default_timeout_;
  Clock* const clock_;
  uint64_t chunks_ = 0;  // communication thread only

  absl::Mutex mu_;
  absl::Status dead_ ABSL_GUARDED_BY(mu_);  // OK while live
  absl::Status own_abort_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: started once everything above is initialised
};

absl::Status ValidateCreateArgs(const KeyValueStore* store, const std::string& key_prefix,
                                int rank, int world_size, const ShmOptions& opts) {
  RETURN_IF_ERROR(
      ValidateRendezvousArgs(store, key_prefix, "<job>/<generation>/", rank, world_size));
  if (opts.slot_bytes < kSlotAlignment || opts.slot_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShmOptions.slot_bytes is ", opts.slot_bytes, "; it must be in [8 KiB, 1 GiB]"));
  }
  RETURN_IF_ERROR(ValidateBackendTimeouts("ShmOptions", opts.rendezvous_timeout,
                                          opts.collective_timeout));
  return absl::OkStatus();
}

// "/ringleader-<prefix with '/' as '-', at most 64 characters>-<16 hex digits>".
std::string SegmentName(const std::string& key_prefix, uint64_t nonce) {
  std::string tag;
  for (char c : key_prefix) {
    if (tag.size() >= 64) break;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    tag.push_back(plain ? c : '-');
  }
  return absl::StrFormat("/ringleader-%s%016x", tag, nonce);
}

}  // namespace

absl::StatusOr<ShmRendezvous> CreateShmCollective(std::shared_ptr<KeyValueStore> store,
                                                  const std::string& key_prefix, int rank,
                                                  int world_size, const ShmOptions& options) {
  RETURN_IF_ERROR(ValidateCreateArgs(store.get(), key_prefix, rank, world_size, options));
  ShmOptions opts = options;
  opts.slot_bytes = (opts.slot_bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  Clock* clock = opts.clock != nullptr ? opts.clock : Clock::Real();
  const absl::Time deadline = clock->Now() + opts.rendezvous_timeout;
  const std::string segment_key = key_prefix + "shm/segment";
  if (opts.on_progress) {
    opts.on_progress(RendezvousStage::kExchangingAddresses,
                     absl::StrCat("mapping a shared-memory segment with ", world_size - 1,
                                  " peers"));
  }

  // Rank 0 creates and announces; the others map what it announced.
  std::string name;
  uint64_t token_hi = 0;
  uint64_t token_lo = 0;
  absl::StatusOr<std::unique_ptr<ShmSegment>> segment =
      absl::UnavailableError("rank 0 could not create the segment");
  if (rank == 0) {
    absl::BitGen gen;
    token_hi = absl::Uniform<uint64_t>(gen);
    token_lo = absl::Uniform<uint64_t>(gen);
    name = SegmentName(key_prefix, absl::Uniform<uint64_t>(gen));
    segment = ShmSegment::Create(name, world_size, opts.slot_bytes, token_hi, token_lo, rank);
    const std::string announced =
        segment.ok() ? absl::StrFormat("%s %016x %016x", name, token_hi, token_lo) : "-";
    RETURN_IF_ERROR(WithPrefix(store->Set(segment_key, announced), "shared-memory rendezvous: "));
  } else {
    ASSIGN_OR_RETURN(const std::string announced,
                     store->Get(segment_key, std::max(absl::ZeroDuration(), deadline - clock->Now())));
    const std::vector<std::string> parts = absl::StrSplit(announced, ' ');
    if (parts.size() == 3 && absl::SimpleHexAtoi(parts[1], &token_hi) &&
        absl::SimpleHexAtoi(parts[2], &token_lo)) {
      name = parts[0];
      segment = ShmSegment::Open(name, world_size, opts.slot_bytes, token_hi, token_lo, rank);
    }
  }
  // Whatever happens next, rank 0 removes the name once every rank had its chance to map it.
  struct Unlinker {
    std::string name;
    ~Unlinker() {
      if (!name.empty()) ShmSegment::Unlink(name);
    }
  } unlinker{rank == 0 && segment.ok() ? name : std::string()};

  RETURN_IF_ERROR(WithPrefix(
      store->Set(absl::StrCat(key_prefix, "shm/mapped/", rank),
                 segment.ok() ? std::string("ok") : std::string(segment.status().message())),
      "shared-memory rendezvous: "));
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(absl::StrCat(key_prefix, "shm/mapped/", r));
  ASSIGN_OR_RETURN(std::vector<std::string> answers,
                   store->GetMany(keys, ValueParts(),
                                  std::max(absl::ZeroDuration(), deadline - clock->Now())));
  std::vector<std::string> refused;
  for (int r = 0; r < world_size; ++r) {
    if (answers[r] != "ok") refused.push_back(absl::StrCat("rank ", r, ": ", answers[r]));
  }
  ShmRendezvous result;
  if (!refused.empty()) {
    result.unavailable = absl::StrJoin(refused, "; ");
    return result;
  }
  result.collective = std::make_unique<ShmCollective>(*std::move(segment), opts);
  return result;
}

}  // namespace ringleader
