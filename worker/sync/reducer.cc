#include "worker/sync/reducer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Programmer bugs (wrong call order, index out of range) abort with a message: returning an
// error from a backward hook would leave the other ranks waiting in a collective.
void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "ringleader::Reducer misuse: %s\n", what);
  std::abort();
}

BucketLayoutOptions LayoutOptions(const ReducerOptions& opts) {
  BucketLayoutOptions l;
  l.first_bucket_bytes = static_cast<size_t>(std::max(1.0, opts.first_bucket_mb * kMiB));
  l.bucket_cap_bytes = static_cast<size_t>(std::max(1.0, opts.bucket_cap_mb * kMiB));
  l.element_bytes = sizeof(float);  // buckets are sized by the gradients' dtype, as in DDP
  l.extra_tail = 1;                 // the readiness sentinel
  return l;
}

std::vector<size_t> Counts(const std::vector<ParameterInfo>& params) {
  std::vector<size_t> counts;
  counts.reserve(params.size());
  for (const ParameterInfo& p : params) counts.push_back(p.count);
  return counts;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Reducer>> Reducer::Create(Collective* comm,
                                                         std::vector<ParameterInfo> params,
                                                         ReducerOptions opts) {
  if (comm == nullptr) return absl::InvalidArgumentError("reducer: comm is null");
  if (params.empty()) {
    return absl::InvalidArgumentError("reducer: the model has no parameters to synchronise");
  }
  for (const ParameterInfo& p : params) {
    if (p.count == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("reducer: parameter '", p.name, "' has 0 elements"));
    }
  }
  if (!(opts.bucket_cap_mb > 0) || !std::isfinite(opts.bucket_cap_mb)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reducer: sync.bucket_cap_mb must be a positive number of MiB, got ", opts.bucket_cap_mb));
  }
  if (!(opts.first_bucket_mb > 0) || !std::isfinite(opts.first_bucket_mb)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reducer: sync.first_bucket_mb must be a positive number of MiB, got ",
                     opts.first_bucket_mb));
  }
  if (opts.gradient_accumulation_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reducer: sync.gradient_accumulation_steps must be >= 1, got ",
                     opts.gradient_accumulation_steps));
  }
  if (opts.comm_dtype == DataType::kUInt8) {
    return absl::InvalidArgumentError(
        "reducer: sync.comm_dtype must be fp32 or bf16 (uint8 cannot carry gradients)");
  }
  if (opts.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reducer: timeout must be > 0");
  }
  if (opts.ledger_check_interval_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reducer: ledger_check_interval_steps must be >= 0 (0 = never), got ",
                     opts.ledger_check_interval_steps));
  }
  if (opts.clock == nullptr) return absl::InvalidArgumentError("reducer: clock is null");
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "reducer"));
  ASSIGN_OR_RETURN(BucketLayout layout,
                   ComputeBucketLayout(Counts(params), ReverseRegistrationOrder(params.size()),
                                       LayoutOptions(opts)));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  std::unique_ptr<Reducer> reducer(
      new Reducer(comm, std::move(params), opts, std::move(layout), memory));
  RETURN_IF_ERROR(reducer->AllocateArena());
  return reducer;
}

Reducer::Reducer(Collective* comm, std::vector<ParameterInfo> params, ReducerOptions opts,
                 BucketLayout layout, TensorMemory* memory)
    : comm_(comm),
      params_(std::move(params)),
      opts_(opts),
      layout_(std::move(layout)),
      memory_(memory),
      step_(opts.first_step) {
  ready_now_.assign(params_.size(), 0);
  ready_in_step_.assign(params_.size(), 0);
}

Reducer::~Reducer() {
  // In-flight collectives write into the arena: wait for them before it is freed.
  for (auto& w : bucket_work_) {
    if (w != nullptr) w->Wait().IgnoreError();
  }
  if (extra_bucket_work_ != nullptr) extra_bucket_work_->Wait().IgnoreError();
}

absl::Status Reducer::AllocateArena() {
  ASSIGN_OR_RETURN(arena_, TensorBuffer<float>::Allocate(memory_, layout_.arena_count()));
  RETURN_IF_ERROR(memory_->Zero(arena_.data(), arena_.bytes()));
  if (opts_.comm_dtype == DataType::kBFloat16) {
    // Every element is written by a cast before a collective reads it.
    ASSIGN_OR_RETURN(bf16_arena_, TensorBuffer<uint16_t>::Allocate(memory_, layout_.arena_count()));
  }
  return absl::OkStatus();
}

void Reducer::NoteMemoryError(const absl::Status& s) {
  if (!s.ok() && memory_error_.ok()) {
    memory_error_ = absl::Status(
        s.code(), absl::StrCat("step ", step_, ": reducer memory (", memory_->name(), "): ",
                               s.message()));
  }
}

std::vector<float*> Reducer::gradient_slots() {
  std::vector<float*> slots(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) slots[i] = arena_.data() + layout_.param_offset[i];
  return slots;
}

bool Reducer::layout_changed() {
  bool changed = layout_changed_;
  layout_changed_ = false;
  return changed;
}

void Reducer::ZeroGradients() {
  Check(!syncing_ || next_bucket_ == 0,
        "ZeroGradients() while bucket all-reduces are in flight (call FinishStep first)");
  NoteMemoryError(memory_->Zero(arena_.data(), arena_.bytes()));
}

void Reducer::BeginMicroBatch(int k) {
  const int last = opts_.gradient_accumulation_steps - 1;
  Check(k >= 0 && k <= last, "BeginMicroBatch: index outside [0, gradient_accumulation_steps)");
  Check(!syncing_, "BeginMicroBatch during the sync micro-batch (call FinishStep first)");
  Check(k == 0 || k == micro_batch_ + 1, "BeginMicroBatch: micro-batches must come 0, 1, ...");
  if (k == 0) {
    // Slots of the pre-rebuild arena were valid until now (see gradient_slots()).
    retired_arena_.Reset();
    std::fill(ready_in_step_.begin(), ready_in_step_.end(), 0);
  }
  micro_batch_ = k;
  std::fill(ready_now_.begin(), ready_now_.end(), 0);
  if (k == last) StartSyncMicroBatch();
}

void Reducer::RecordForStep(CollectiveKind kind, int32_t bucket, size_t count, DataType dtype) {
  step_records_.push_back(ledger_.Record(kind, bucket, count, dtype));
}

void Reducer::MarkReady(size_t i) {
  Check(i < params_.size(), "MarkReady: parameter index out of range");
  Check(micro_batch_ >= 0, "MarkReady before BeginMicroBatch");
  if (ready_now_[i]) return;
  ready_now_[i] = 1;
  ready_in_step_[i] = 1;
  if (!syncing_) return;
  if (opts_.rebuild_buckets && synced_steps_ == 0) ready_order_.push_back(i);
  --bucket_pending_[layout_.param_bucket[i]];
  if (opts_.overlap && failed_.ok() && pending_error_.ok()) LaunchReadyBuckets();
}

void Reducer::LaunchReadyBuckets() {
  // Strictly in bucket order: every rank then issues the same sequence, whatever order its
  // gradients arrive in.
  while (next_bucket_ < layout_.buckets.size() && bucket_pending_[next_bucket_] == 0) {
    if (next_bucket_ == 0) {
      pending_error_ = ResolveLedgerCheck();
      if (!pending_error_.ok()) return;
    }
    LaunchBucket(next_bucket_++, /*from_backward=*/true);
  }
}

void Reducer::LaunchBucket(size_t b, bool from_backward) {
  const Bucket& bucket = layout_.buckets[b];
  const size_t count = layout_.collective_count(b);
  float* data = arena_.data() + bucket.offset;
  TensorView view{data, count, DataType::kFloat32};
  if (opts_.comm_dtype == DataType::kBFloat16) {
    uint16_t* wire = bf16_arena_.data() + bucket.offset;
    // A failed cast still issues the collective (with whatever the wire holds), so the other
    // ranks never wait for a bucket this rank skipped; FinishStep reports the failure.
    NoteMemoryError(memory_->CastToBf16(data, wire, count));
    view = TensorView{wire, count, DataType::kBFloat16};
  }
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = static_cast<int>(b);
  bucket_launch_time_[b] = opts_.clock->Now();
  bucket_work_[b] = comm_->AllReduce(view, ReduceOp::kAvg, copts);
  if (from_backward) ++launched_in_backward_;
}

std::string Reducer::BucketName(size_t b) const {
  const Bucket& bucket = layout_.buckets[b];
  return absl::StrCat("bucket ", b, " (", bucket.params.size(), " parameters from '",
                      params_[bucket.params.front()].name, "', ", layout_.collective_count(b),
                      " x ", DataTypeName(opts_.comm_dtype), ")");
}

absl::Status Reducer::FinishStep(StepSyncStats* stats) {
  StepSyncStats local;
  if (stats == nullptr) stats = &local;
  *stats = StepSyncStats();
  stats->step = step_;
  if (!failed_.ok()) return failed_;
  if (micro_batch_ < 0) {
    failed_ = absl::FailedPreconditionError(absl::StrCat(
        "reducer: FinishStep for step ", step_, " without BeginMicroBatch (call "
        "BeginMicroBatch(k) before each micro-batch's backward)"));
    return failed_;
  }
  if (!syncing_) {  // no_sync micro-batch: gradients just accumulate
    failed_ = memory_error_;
    return failed_;
  }
  absl::Status s = FinishSync(stats);
  syncing_ = false;
  micro_batch_ = -1;
  if (!s.ok()) failed_ = s;
  return s;
}

absl::Status Reducer::FinishSync(StepSyncStats* stats) {
  const absl::Time finish_start = opts_.clock->Now();
  const size_t nb = layout_.buckets.size();

  std::vector<size_t> unready;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_now_[i]) continue;
    unready.push_back(i);
    // No gradient in any micro-batch: reduce zeros, never stale slot contents. A parameter used
    // only in earlier micro-batches keeps what they accumulated.
    if (!ready_in_step_[i]) {
      NoteMemoryError(memory_->Zero(arena_.data() + layout_.param_offset[i],
                                    layout_.param_count[i] * sizeof(float)));
    }
  }
  if (!pending_error_.ok()) return pending_error_;  // ledger check failed during backward
  RETURN_IF_ERROR(ResolveLedgerCheck());

  // Which buckets were already done when backward ended: their whole duration was hidden.
  std::vector<bool> done_at_finish(nb, false);
  for (size_t b = 0; b < next_bucket_; ++b) done_at_finish[b] = bucket_work_[b]->IsDone();
  // The sentinel rides in the last bucket. If that bucket was launched in backward every
  // parameter was ready and its slot still holds the 0 the last step left there.
  if (next_bucket_ < nb) {
    const float count = static_cast<float>(unready.size());
    NoteMemoryError(
        memory_->CopyFromHost(arena_.data() + layout_.gradient_count, &count, sizeof(float)));
  }
  while (next_bucket_ < nb) LaunchBucket(next_bucket_++, /*from_backward=*/false);
  RETURN_IF_ERROR(WaitForBuckets(done_at_finish, finish_start, stats));
  RETURN_IF_ERROR(memory_error_);

  float sentinel = 0;
  RETURN_IF_ERROR(ReadAndClearSentinel(&sentinel));
  // Identical on every rank (it is an all-reduce result), so every rank takes the same branch.
  if (sentinel != 0.0f) {
    if (!opts_.find_unused_parameters) return CheckUnready(unready);
    for (size_t i : unready) stats->unused_parameters.push_back(params_[i].name);
  }
  if (opts_.rebuild_buckets && synced_steps_ == 0) RETURN_IF_ERROR(RebuildBuckets());

  stats->synced = true;
  stats->buckets = static_cast<int>(nb);
  stats->buckets_launched_in_backward = launched_in_backward_;
  stats->collectives = static_cast<int>(step_records_.size());
  stats->collective_digest = DigestRecords(step_records_);
  stats->ledger_checked = ledger_checked_this_step_;
  stats->finish_time = opts_.clock->Now() - finish_start;
  ++step_;
  ++synced_steps_;
  return absl::OkStatus();
}

// Waits for every bucket (even after a failure: the collectives write into the arena) and the
// test's extra bucket; fills the timing stats.
absl::Status Reducer::WaitForBuckets(const std::vector<bool>& done_at_finish,
                                     absl::Time finish_start, StepSyncStats* stats) {
  const size_t nb = layout_.buckets.size();
  absl::Status first_error;
  absl::Duration comm, hidden;
  for (size_t b = 0; b < nb; ++b) {
    absl::Status s = bucket_work_[b]->Wait();
    const absl::Time done = opts_.clock->Now();
    if (!s.ok() && first_error.ok()) {
      first_error =
          WithPrefix(s, absl::StrCat("step ", step_, ": all-reduce of ", BucketName(b), " failed: "));
    }
    const absl::Duration d = bucket_work_[b]->Duration();
    comm += d;
    if (done_at_finish[b]) {
      hidden += d;
    } else if (bucket_launch_time_[b] < finish_start) {
      hidden += std::max(absl::ZeroDuration(), d - (done - finish_start));
    }
    stats->bytes_communicated += layout_.collective_count(b) * DataTypeSize(opts_.comm_dtype);
  }
  if (extra_bucket_work_ != nullptr) {
    absl::Status s = extra_bucket_work_->Wait();
    extra_bucket_work_.reset();
    if (!s.ok() && first_error.ok()) {
      first_error = absl::Status(
          s.code(), absl::StrCat("step ", step_, ": test extra bucket failed: ", s.message()));
    }
  }
  stats->exposed_wait_time = opts_.clock->Now() - finish_start;
  stats->comm_time = comm;
  stats->hidden_comm_time = hidden;
  bucket_work_.assign(nb, nullptr);
  return first_error;
}

// Casts the reduced buckets back (bf16), then reads the all-reduced sentinel and leaves 0 in
// its slot for the next step.
absl::Status Reducer::ReadAndClearSentinel(float* sentinel) {
  if (opts_.comm_dtype == DataType::kBFloat16) {
    RETURN_IF_ERROR(memory_->CastFromBf16(bf16_arena_.data(), arena_.data(), arena_.size()));
  }
  float* slot = arena_.data() + layout_.gradient_count;
  RETURN_IF_ERROR(memory_->CopyToHost(sentinel, slot, sizeof(float)));
  return memory_->Zero(slot, sizeof(float));
}

absl::Status Reducer::RebuildBuckets() {
  const size_t n = params_.size();
  // This rank's observed order; parameters never marked go last, latest-registered first.
  std::vector<uint8_t> seen(n, 0);
  std::vector<uint32_t> order;
  order.reserve(n);
  for (size_t i : ready_order_) {
    order.push_back(static_cast<uint32_t>(i));
    seen[i] = 1;
  }
  for (size_t i : ReverseRegistrationOrder(n)) {
    if (!seen[i]) order.push_back(static_cast<uint32_t>(i));
  }
  // Rank 0's order wins, so every rank computes the same layout.
  ASSIGN_OR_RETURN(StagedBytes wire, StagedBytes::Create(memory_, n * 4));
  for (size_t k = 0; k < n; ++k) {
    for (int j = 0; j < 4; ++j) wire.host()[4 * k + j] = static_cast<uint8_t>(order[k] >> (8 * j));
  }
  RETURN_IF_ERROR(wire.Upload());
  RecordForStep(CollectiveKind::kBroadcast, kTagLayoutOrder, wire.size(), DataType::kUInt8);
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = kTagLayoutOrder;
  absl::Status s = comm_->Broadcast(wire.view(), 0, copts)->Wait();
  if (s.ok()) s = wire.Download();
  if (!s.ok()) {
    return WithPrefix(s, absl::StrCat("step ", step_,
                                      ": broadcast of the rebuilt bucket order failed: "));
  }
  std::vector<size_t> root_order(n);
  for (size_t k = 0; k < n; ++k) {
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= static_cast<uint32_t>(wire.host()[4 * k + j]) << (8 * j);
    root_order[k] = v;
  }
  absl::StatusOr<BucketLayout> rebuilt =
      ComputeBucketLayout(Counts(params_), root_order, LayoutOptions(opts_));
  if (!rebuilt.ok()) {
    return absl::InternalError(absl::StrCat("step ", step_, ": rank 0's bucket order is invalid: ",
                                            rebuilt.status().message()));
  }
  if (LayoutFingerprint(*rebuilt) == LayoutFingerprint(layout_)) return absl::OkStatus();

  ASSIGN_OR_RETURN(TensorBuffer<float> arena,
                   TensorBuffer<float>::Allocate(memory_, rebuilt->arena_count()));
  RETURN_IF_ERROR(memory_->Zero(arena.data(), arena.bytes()));
  for (size_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(memory_->Copy(arena.data() + rebuilt->param_offset[i],
                                  arena_.data() + layout_.param_offset[i],
                                  layout_.param_count[i] * sizeof(float)));
  }
  // The bf16 wire buffer keeps its size (same elements) and is rewritten before each use.
  retired_arena_ = std::move(arena_);
  arena_ = std::move(arena);
  layout_ = std::move(*rebuilt);
  layout_changed_ = true;
  return absl::OkStatus();
}

}  // namespace ringleader
