#include "worker/collective/gloo/gloo_collective.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/context.h"
// Only the device header: Debian's package lacks gloo/common/memory.h, which the other tcp
// transport headers include.
#include "gloo/transport/tcp/device.h"
#include "worker/collective/collective_util.h"
#include "worker/collective/host_ops.h"
#include "worker/collective/gloo/gloo_peers.h"
#include "worker/collective/gloo/gloo_status.h"
#include "worker/collective/gloo/kv_gloo_store.h"

namespace ringleader {
namespace {

// One gloo ring all-reduce of `count` elements of `dtype` in place at `data`.
absl::Status GlooAllReduceInPlace(const std::shared_ptr<gloo::Context>& ctx, void* data,
                                  size_t count, DataType dtype, ReduceOp op, uint32_t tag,
                                  std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions o(ctx);
  o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  // Typed by element size only; the reduce function knows the real type.
  switch (DataTypeSize(dtype)) {
    case 4:
      o.setOutput(static_cast<uint32_t*>(data), count);
      break;
    case 2:
      o.setOutput(static_cast<uint16_t*>(data), count);
      break;
    default:
      o.setOutput(static_cast<uint8_t*>(data), count);
      break;
  }
  o.setReduceFunction(PairwiseReduction(dtype, op));
  o.setTag(tag);
  o.setTimeout(timeout);
  return RL_GLOO_CALL_WITHIN(timeout, gloo::allreduce(o));
}

// gloo's TCP pairs write with writev(), which raises SIGPIPE when the peer has closed its end:
// the whole process would die of the signal instead of this rank failing with PEER_CLOSED. A
// process that runs gloo ignores SIGPIPE; its writes then fail with EPIPE, which gloo throws.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::chrono::milliseconds ToMillis(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// ---- The collective ----

class GlooCollective : public Collective {
 public:
  GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context, const GlooOptions& opts,
                 std::map<int, std::string> peers)
      : context_(std::move(context)),
        peers_(std::move(peers)),
        rank_(context_->rank),
        world_size_(context_->size),
        default_timeout_(opts.collective_timeout),
        clock_(opts.clock != nullptr ? opts.clock : Clock::Real()),
        queues_(opts.comm_threads) {
    threads_.reserve(opts.comm_threads);
    for (int i = 0; i < opts.comm_threads; ++i) {
      threads_.emplace_back([this, i] { CommLoop(i); });
    }
  }

  ~GlooCollective() override {
    Abort(absl::AbortedError("gloo collective destroyed"));
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    // Blocks until in-flight gloo calls return (by completion, peer loss or their timeout).
    for (std::thread& t : threads_) t.join();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return "gloo"; }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }

  std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                  const CollectiveOptions& opts) override {
    const std::string what = absl::StrFormat("all_reduce(%s, %s)", ReduceOpName(op),
                                             DataTypeName(buf.dtype));
    const absl::Status valid = ValidateAllReduce(buf, op);
    const int n = world_size_;
    return Enqueue(what, opts, buf.count, valid,
                   [ctx = context_, buf, op, n](uint32_t tag, std::chrono::milliseconds timeout) {
                     absl::Status s = GlooAllReduceInPlace(ctx, buf.data, buf.count, buf.dtype,
                                                           op, tag, timeout);
                     if (s.ok() && op == ReduceOp::kAvg) {
                       DivideInPlace(buf.data, buf.count, buf.dtype, n);
                     }
                     return s;
                   });
  }

  std::shared_ptr<Work> Broadcast(TensorView buf, int root,
                                  const CollectiveOptions& opts) override {
    const std::string what = absl::StrFormat("broadcast(root %d, %s)", root,
                                             DataTypeName(buf.dtype));
    const absl::Status valid = ValidateBroadcast(buf, root, world_size_);
    return Enqueue(what, opts, buf.count, valid,
                   [ctx = context_, buf, root](uint32_t tag, std::chrono::milliseconds timeout) {
                     // In place: every rank's output is the buffer; the root's is also the source.
                     gloo::BroadcastOptions o(ctx);
                     o.setOutput(static_cast<uint8_t*>(buf.data), buf.bytes());
                     o.setRoot(root);
                     o.setTag(tag);
                     o.setTimeout(timeout);
                     return RL_GLOO_CALL_WITHIN(timeout, gloo::broadcast(o));
                   });
  }

  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override {
    const std::string what = absl::StrFormat("all_gather(%s)", DataTypeName(in.dtype));
    const absl::Status valid = ValidateAllGather(in, out, world_size_);
    return Enqueue(what, opts, in.count, valid,
                   [ctx = context_, in, out](uint32_t tag, std::chrono::milliseconds timeout) {
                     gloo::AllgatherOptions o(ctx);
                     o.setInput(static_cast<uint8_t*>(in.data), in.bytes());
                     o.setOutput(static_cast<uint8_t*>(out.data), out.bytes());
                     o.setTag(tag);
                     o.setTimeout(timeout);
                     return RL_GLOO_CALL_WITHIN(timeout, gloo::allgather(o));
                   });
  }

  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts) override {
    const std::string what = absl::StrFormat("reduce_scatter(%s, %s)", ReduceOpName(op),
                                             DataTypeName(in.dtype));
    const absl::Status valid = ValidateReduceScatter(in, out, op, world_size_);
    const int n = world_size_;
    const int r = rank_;
    return Enqueue(
        what, opts, in.count, valid,
        [ctx = context_, in, out, op, n, r](uint32_t tag, std::chrono::milliseconds timeout) {
          // No reduce-scatter in gloo's option-based API: all-reduce a scratch copy of the whole
          // input (n x the traffic of a real reduce-scatter) and keep this rank's slice.
          std::vector<char> scratch(static_cast<const char*>(in.data),
                                    static_cast<const char*>(in.data) + in.bytes());
          absl::Status s =
              GlooAllReduceInPlace(ctx, scratch.data(), in.count, in.dtype, op, tag, timeout);
          if (!s.ok()) return s;
          std::memcpy(out.data, scratch.data() + static_cast<size_t>(r) * out.bytes(),
                      out.bytes());
          if (op == ReduceOp::kAvg) DivideInPlace(out.data, out.count, out.dtype, n);
          return absl::OkStatus();
        });
  }

  std::shared_ptr<Work> Barrier(const CollectiveOptions& opts) override {
    return Enqueue("barrier", opts, 0, absl::OkStatus(),
                   [ctx = context_](uint32_t tag, std::chrono::milliseconds timeout) {
                     gloo::BarrierOptions o(ctx);
                     o.setTag(tag);
                     o.setTimeout(timeout);
                     return RL_GLOO_CALL_WITHIN(timeout, gloo::barrier(o));
                   },
                   /*runs_when_empty=*/true);
  }

  absl::Status Close(absl::Duration timeout) override {
    CollectiveOptions opts;
    opts.timeout = timeout;
    // A failed barrier already made its error the collective's (gloo's context is unusable
    // after any failure); the destructor tears the transport down.
    RETURN_IF_ERROR(Barrier(opts)->Wait());
    // Every rank is past its last operation: later calls are refused; the destructor tears the
    // transport down.
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    dead_ = absl::FailedPreconditionError(
        absl::StrCat("gloo rank ", rank_, "/", world_size_, " closed"));
    return absl::OkStatus();
  }

  void Abort(const absl::Status& reason) override {
    std::vector<Op> cancelled;
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (aborted_) return;
      aborted_ = true;
      dead_ = absl::AbortedError(absl::StrCat(
          "gloo rank ", rank_, "/", world_size_, " aborted: ",
          reason.ok() ? std::string("no reason given") : reason.ToString()));
      status = dead_;
      for (std::deque<Op>& queue : queues_) {
        for (Op& op : queue) cancelled.push_back(std::move(op));
        queue.clear();
      }
    }
    for (Op& op : cancelled) op.work->Finish(status, absl::ZeroDuration());
  }

 private:
  // Runs the gloo call(s) of one operation; returns its status. Must not throw.
  using RunFn = std::function<absl::Status(uint32_t tag, std::chrono::milliseconds timeout)>;

  struct Op {
    std::string description;  // "gloo rank 1/4 all_reduce(sum, fp32) bucket 3 count 1000"
    std::shared_ptr<FinishableWork> work;
    RunFn run;
    uint32_t tag = 0;
    std::chrono::milliseconds timeout{0};
    bool skip_gloo = false;  // zero elements: nothing to exchange
  };

  std::shared_ptr<Work> Enqueue(const std::string& what, const CollectiveOptions& opts,
                                size_t count, const absl::Status& valid, RunFn run,
                                bool runs_when_empty = false) {
    const std::string description =
        DescribeOperation("gloo", rank_, world_size_, what, opts.bucket, count);
    if (auto refused = RefuseInvalid(description, valid, opts.timeout)) return refused;
    auto work = std::make_shared<FinishableWork>();
    Op op;
    op.description = description;
    op.work = work;
    op.run = std::move(run);
    op.timeout = ToMillis(opts.timeout > absl::ZeroDuration() ? opts.timeout : default_timeout_);
    op.skip_gloo = count == 0 && !runs_when_empty;

    absl::MutexLock lock(&mu_);
    if (!dead_.ok()) {
      work->Finish(dead_, absl::ZeroDuration());
      return work;
    }
    // Every rank issues the same sequence, so the sequence number is the same op on every rank:
    // it picks the thread and (as the gloo tag) the message slots.
    const uint64_t seq = next_seq_++;
    op.tag = static_cast<uint32_t>(seq);
    queues_[seq % queues_.size()].push_back(std::move(op));
    return work;
  }

  void CommLoop(int index) {
    for (;;) {
      Op op;
      absl::Status dead;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queues_[index].empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queues_[index].empty()) return;  // stopping, nothing left
        op = std::move(queues_[index].front());
        queues_[index].pop_front();
        dead = dead_;
      }
      if (!dead.ok()) {
        op.work->Finish(dead, absl::ZeroDuration());
        continue;
      }
      const absl::Time start = clock_->Now();
      op.work->Start(start);
      absl::Status status = op.skip_gloo ? absl::OkStatus() : op.run(op.tag, op.timeout);
      const absl::Duration duration = clock_->Now() - start;
      if (!status.ok()) {
        // A transport error names its peer by address only: say which rank it is.
        status = WithPrefix(NamePeerInGlooError(status, peers_, "peer"),
                            absl::StrCat(op.description, ": "));
      }
      {
        absl::MutexLock lock(&mu_);
        if (aborted_) {
          // Abort overrides whatever the op did: the caller asked for the attempt to end.
          status = dead_;
        } else if (!status.ok() && dead_.ok()) {
          // gloo's context is unusable after any throw: the first error kills the collective.
          dead_ = status;
        }
      }
      op.work->Finish(std::move(status), duration);
    }
  }

  const std::shared_ptr<gloo::rendezvous::Context> context_;
  // The address each peer published for this rank ("host:port" by rank), for naming the peer
  // of a transport error.
  const std::map<int, std::string> peers_;
  const int rank_;
  const int world_size_;
  const absl::Duration default_timeout_;
  Clock* const clock_;

  absl::Mutex mu_;
  absl::Status dead_ ABSL_GUARDED_BY(mu_);  // OK while live; else what every op now returns
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::deque<Op>> queues_ ABSL_GUARDED_BY(mu_);  // one per thread, issue order

  std::vector<std::thread> threads_;  // set in the constructor, joined in the destructor
};

absl::Status ValidateCreateArgs(const KeyValueStore* store, const std::string& key_prefix,
                                int rank, int world_size, const GlooOptions& opts) {
  RETURN_IF_ERROR(ValidateRendezvousArgs(store, key_prefix, "<job>/<generation>/gloo/", rank, world_size));
  if (opts.comm_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlooOptions.comm_threads is ", opts.comm_threads, "; it must be >= 1"));
  }
  RETURN_IF_ERROR(ValidateBackendTimeouts("GlooOptions", opts.rendezvous_timeout,
                                          opts.collective_timeout));
  if (opts.hostname.empty()) {
    return absl::InvalidArgumentError(
        "GlooOptions.hostname is empty; give the address of the interface to bind");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(
    std::shared_ptr<KeyValueStore> store, const std::string& key_prefix, int rank, int world_size,
    const GlooOptions& opts) {
  RETURN_IF_ERROR(ValidateCreateArgs(store.get(), key_prefix, rank, world_size, opts));
  IgnoreSigpipe();
  const std::string where = absl::StrCat("gloo rendezvous of rank ", rank, "/", world_size,
                                         " under \"", key_prefix, "\"");

  gloo::transport::tcp::attr attr;
  attr.hostname = opts.hostname;
  std::shared_ptr<gloo::transport::Device> device;
  absl::Status status = RL_GLOO_CALL(device = gloo::transport::tcp::CreateDevice(attr));
  if (!status.ok()) {
    return WithMessage(status, absl::StrCat(where, ": cannot bind GlooOptions.hostname \"",
                                            opts.hostname, "\": ", status.message()));
  }

  KvGlooStore kv(store, key_prefix, opts.rendezvous_timeout, opts.clock, rank, world_size,
                 opts.on_progress);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
  context->setTimeout(ToMillis(opts.rendezvous_timeout));
  status = RL_GLOO_CALL_WITHIN(ToMillis(opts.rendezvous_timeout),
                               context->connectFullMesh(kv, device));
  if (!status.ok()) {
    // Prefer the store's own error: its code (DEADLINE_EXCEEDED, FAILED_PRECONDITION, ...) and the
    // key that never appeared say more than gloo's rethrown text.
    const absl::Status store_error = kv.first_error();
    const absl::Status cause =
        store_error.ok() ? NamePeerInGlooError(status, kv.peer_addresses(), "could not connect to")
                         : store_error;
    // A key that never appeared is a rank that never got this far; a connect that timed out
    // is a rank that published its address and then did not answer.
    std::string hint;
    if (cause.code() == absl::StatusCode::kDeadlineExceeded && !store_error.ok()) {
      hint = absl::StrCat(" (not every rank joined within ",
                          absl::FormatDuration(opts.rendezvous_timeout), ")");
    }
    return WithPrefix(cause, absl::StrCat(where, hint, ": "));
  }
  return std::unique_ptr<Collective>(
      new GlooCollective(std::move(context), opts, kv.peer_addresses()));
}

}  // namespace ringleader
