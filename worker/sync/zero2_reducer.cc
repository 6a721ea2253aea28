#include "worker/sync/zero2_reducer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

// Names listed per rank in the unused-parameter error before "... and N more".
constexpr size_t kMaxNamesPerRank = 10;

// Programmer bugs (wrong call order, index out of range) abort: returning an error from a
// backward hook would leave the other ranks waiting in a collective.
void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "ringleader::Zero2Reducer misuse: %s\n", what);
  std::abort();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Zero2Reducer>> Zero2Reducer::Create(
    Collective* comm, std::vector<ParameterInfo> params, Zero2Plan plan,
    Zero2ReducerOptions opts) {
  if (comm == nullptr) return absl::InvalidArgumentError("zero2 reducer: comm is null");
  if (opts.clock == nullptr) return absl::InvalidArgumentError("zero2 reducer: clock is null");
  if (opts.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("zero2 reducer: timeout must be > 0");
  }
  if (opts.accumulation_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zero2 reducer: accumulation_steps must be >= 1, got ", opts.accumulation_steps));
  }
  if (opts.ledger_check_interval_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero2 reducer: ledger_check_interval_steps must be >= 0 (0 = never), got ",
                     opts.ledger_check_interval_steps));
  }
  if (plan.world_size != static_cast<size_t>(comm->world_size()) ||
      plan.trainable.size() != params.size() || params.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zero2 reducer: the plan is for ", plan.world_size, " ranks and ", plan.trainable.size(),
        " trainable parameters, the reducer has ", comm->world_size(), " ranks and ",
        params.size()));
  }
  for (size_t t = 0; t < params.size(); ++t) {
    if (plan.layout.param_count[t] != params[t].count) {
      return absl::InvalidArgumentError(
          absl::StrCat("zero2 reducer: parameter '", params[t].name, "' has ", params[t].count,
                       " elements, the plan ", plan.layout.param_count[t]));
    }
  }
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "zero2 reducer"));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  std::unique_ptr<Zero2Reducer> reducer(
      new Zero2Reducer(comm, std::move(params), std::move(plan), opts, memory));
  ASSIGN_OR_RETURN(StagedBytes exchange, StagedBytes::Create(memory, 2 * sizeof(float)));
  reducer->exchange_ = std::make_unique<StagedBytes>(std::move(exchange));
  ASSIGN_OR_RETURN(reducer->shard_, TensorBuffer<float>::Allocate(
                                        memory, reducer->plan_.shard_elements));
  RETURN_IF_ERROR(memory->Zero(reducer->shard_.data(), reducer->shard_.bytes()));
  if (opts.accumulation_steps > 1) {
    ASSIGN_OR_RETURN(reducer->incoming_, TensorBuffer<float>::Allocate(
                                             memory, reducer->plan_.shard_elements));
  }
  if (opts.bf16_wire) {
    ASSIGN_OR_RETURN(reducer->shard_wire_, TensorBuffer<uint16_t>::Allocate(
                                               memory, reducer->plan_.shard_elements));
  }
  for (size_t k = 0; k < reducer->plan_.pool_buffers; ++k) {
    ASSIGN_OR_RETURN(TensorBuffer<float> buffer,
                     TensorBuffer<float>::Allocate(memory, reducer->plan_.pool_buffer_elements));
    reducer->pool_.push_back(std::move(buffer));
    reducer->holder_.push_back(-1);
    RETURN_IF_ERROR(reducer->AddWireBuffer());
  }
  return reducer;
}

Zero2Reducer::Zero2Reducer(Collective* comm, std::vector<ParameterInfo> params, Zero2Plan plan,
                           Zero2ReducerOptions opts, TensorMemory* memory)
    : comm_(comm),
      params_(std::move(params)),
      plan_(std::move(plan)),
      opts_(opts),
      memory_(memory),
      rank_(static_cast<size_t>(comm->rank())),
      step_(opts.first_step) {
  ready_.assign(params_.size(), 0);
  buffer_of_.assign(plan_.layout.buckets.size(), -1);
}

Zero2Reducer::~Zero2Reducer() {
  // In-flight reduce-scatters read the pool and write the shard: wait before they are freed.
  for (auto& w : work_) {
    if (w != nullptr) w->Wait().IgnoreError();
  }
}

// bf16 on the wire: the bf16 copy of the pool buffer just added (same index).
absl::Status Zero2Reducer::AddWireBuffer() {
  if (!opts_.bf16_wire) return absl::OkStatus();
  ASSIGN_OR_RETURN(TensorBuffer<uint16_t> wire,
                   TensorBuffer<uint16_t>::Allocate(memory_, plan_.pool_buffer_elements));
  pool_wire_.push_back(std::move(wire));
  return absl::OkStatus();
}

size_t Zero2Reducer::wire_buffer_bytes() const {
  size_t bytes = shard_wire_.bytes();
  for (const TensorBuffer<uint16_t>& b : pool_wire_) bytes += b.bytes();
  return bytes;
}

size_t Zero2Reducer::gradient_bytes() const {
  size_t bytes = shard_.bytes() + incoming_.bytes();
  for (const TensorBuffer<float>& b : pool_) bytes += b.bytes();
  return bytes;
}

const float* Zero2Reducer::owned_gradient(size_t t) const {
  Check(t < params_.size(), "owned_gradient: parameter index out of range");
  if (plan_.shards.owned[rank_][plan_.trainable[t]].empty()) return nullptr;
  return shard_.data() + plan_.ShardPosition(rank_, t);
}

void Zero2Reducer::NoteError(absl::Status* slot, const absl::Status& s) {
  if (!s.ok() && slot->ok()) *slot = s;
}

void Zero2Reducer::ResetMicroBatch() {
  const size_t nb = plan_.layout.buckets.size();
  std::fill(ready_.begin(), ready_.end(), 0);
  pending_.resize(nb);
  for (size_t b = 0; b < nb; ++b) pending_[b] = plan_.layout.buckets[b].params.size();
  std::fill(buffer_of_.begin(), buffer_of_.end(), -1);
  std::fill(holder_.begin(), holder_.end(), -1);
  work_.assign(nb, nullptr);
  launch_time_.assign(nb, absl::InfinitePast());
  next_bucket_ = 0;
}

void Zero2Reducer::BeginStep() {
  Check(!in_step_, "BeginStep twice without FinishStep");
  in_step_ = true;
  micro_ = 0;
  const size_t nb = plan_.layout.buckets.size();
  ResetMicroBatch();
  unready_any_.assign(params_.size(), 0);
  step_stats_ = StepSyncStats();
  launched_in_backward_ = 0;
  step_records_.clear();
  pending_error_ = absl::OkStatus();
  wait_error_ = absl::OkStatus();
  ledger_checked_this_step_ = false;
  if (!failed_.ok()) return;

  // Record now what this step will issue (every micro-batch's reduce-scatters, then the stats
  // all-reduce), so the check below covers it before it goes out.
  for (int k = 0; k < opts_.accumulation_steps; ++k) {
    for (size_t b = 0; b < nb; ++b) {
      step_records_.push_back(
          ledger_.Record(CollectiveKind::kReduceScatter, static_cast<int32_t>(b),
                         plan_.slice[b] * plan_.world_size,
                         opts_.bf16_wire ? DataType::kBFloat16 : DataType::kFloat32));
    }
  }
  step_records_.push_back(
      ledger_.Record(CollectiveKind::kAllReduce, kTagZero2Stats, 2, DataType::kFloat32));
  const int interval = opts_.ledger_check_interval_steps;
  ledger_check_.reset();
  if (interval > 0 && steps_done_ % interval == 0) {
    ledger_check_ = LedgerCheck::Start(comm_, step_, ledger_.TakeWindow(), opts_.timeout, memory_);
  } else if (interval == 0) {
    ledger_.TakeWindow();
  }
  ledger_check_resolved_ = false;
}

absl::Status Zero2Reducer::ResolveLedgerCheck() {
  if (ledger_check_resolved_) return absl::OkStatus();
  ledger_check_resolved_ = true;
  absl::Status s = ledger_check_ != nullptr ? ledger_check_->Finish() : absl::OkStatus();
  ledger_checked_this_step_ = ledger_check_ != nullptr && s.ok();
  return s;
}

// Gives bucket b a zeroed pool buffer: a free one, else the oldest launched bucket's once its
// reduce-scatter is done, else a new one (see the header).
void Zero2Reducer::TakeBuffer(size_t b) {
  int chosen = -1;
  for (size_t k = 0; k < pool_.size() && chosen < 0; ++k) {
    if (holder_[k] < 0) chosen = static_cast<int>(k);
  }
  if (chosen < 0) {
    int oldest = -1;  // the held buffer of the lowest launched bucket
    for (size_t k = 0; k < pool_.size(); ++k) {
      const int h = holder_[k];
      if (work_[h] != nullptr && (oldest < 0 || h < holder_[oldest])) oldest = static_cast<int>(k);
    }
    if (oldest >= 0) {
      const int h = holder_[oldest];
      absl::Status s = work_[h]->Wait();
      if (!s.ok()) {
        NoteError(&wait_error_,
                  WithPrefix(s, absl::StrCat("step ", step_, ": reduce-scatter of ",
                                             BucketName(static_cast<size_t>(h)), " failed: ")));
      }
      buffer_of_[h] = -1;
      chosen = oldest;
    }
  }
  if (chosen < 0) {
    absl::StatusOr<TensorBuffer<float>> grown =
        TensorBuffer<float>::Allocate(memory_, plan_.pool_buffer_elements);
    Check(grown.ok(), "out of memory growing the zero2 gradient pool");
    pool_.push_back(*std::move(grown));
    holder_.push_back(-1);
    Check(AddWireBuffer().ok(), "out of memory growing the zero2 gradient pool's bf16 copies");
    chosen = static_cast<int>(pool_.size() - 1);
  }
  holder_[chosen] = static_cast<int>(b);
  buffer_of_[b] = chosen;
  ++pool_takes_;
  NoteError(&memory_error_, memory_->Zero(pool_[chosen].data(),
                                          plan_.slice[b] * plan_.world_size * sizeof(float)));
}

float* Zero2Reducer::SlotFor(size_t t) {
  Check(t < params_.size(), "SlotFor: parameter index out of range");
  Check(in_step_, "SlotFor outside a step (call BeginStep first)");
  const size_t b = plan_.layout.param_bucket[t];
  Check(work_[b] == nullptr, "SlotFor: the parameter's bucket was already reduce-scattered");
  if (buffer_of_[b] < 0) TakeBuffer(b);
  return pool_[buffer_of_[b]].data() + (plan_.layout.param_offset[t] -
                                        plan_.layout.buckets[b].offset);
}

void Zero2Reducer::MarkReady(size_t t) {
  Check(t < params_.size(), "MarkReady: parameter index out of range");
  Check(in_step_, "MarkReady outside a step (call BeginStep first)");
  if (ready_[t]) return;
  ready_[t] = 1;
  --pending_[plan_.layout.param_bucket[t]];
  if (failed_.ok() && pending_error_.ok()) LaunchReadyBuckets();
}

void Zero2Reducer::LaunchReadyBuckets() {
  while (next_bucket_ < plan_.layout.buckets.size() && pending_[next_bucket_] == 0) {
    if (next_bucket_ == 0) {
      pending_error_ = ResolveLedgerCheck();
      if (!pending_error_.ok()) return;
    }
    Launch(next_bucket_++, /*from_backward=*/true);
  }
}

void Zero2Reducer::Launch(size_t b, bool from_backward) {
  if (buffer_of_[b] < 0) TakeBuffer(b);  // nothing written: the bucket reduces zeros
  const size_t slice = plan_.slice[b];
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = static_cast<int>(b);
  launch_time_[b] = opts_.clock->Now();
  if (opts_.bf16_wire) {
    // The bucket rounded to bf16 (stream-ordered before the collective), reduced into the bf16
    // shard; ReduceMicroBatch casts the shard back once every bucket is done.
    uint16_t* wire = pool_wire_[buffer_of_[b]].data();
    NoteError(&memory_error_,
              memory_->CastToBf16(pool_[buffer_of_[b]].data(), wire, slice * plan_.world_size));
    work_[b] = comm_->ReduceScatter(
        TensorView{wire, slice * plan_.world_size, DataType::kBFloat16},
        TensorView{shard_wire_.data() + plan_.shard_offset[b], slice, DataType::kBFloat16},
        ReduceOp::kAvg, copts);
  } else {
    // The first micro-batch reduces into the shard, later ones next to it (added after the
    // wait).
    float* into = (micro_ == 0 ? shard_.data() : incoming_.data()) + plan_.shard_offset[b];
    work_[b] = comm_->ReduceScatter(
        TensorView{pool_[buffer_of_[b]].data(), slice * plan_.world_size, DataType::kFloat32},
        TensorView{into, slice, DataType::kFloat32}, ReduceOp::kAvg, copts);
  }
  if (from_backward) ++launched_in_backward_;
}

std::string Zero2Reducer::BucketName(size_t b) const {
  const Bucket& bucket = plan_.layout.buckets[b];
  return absl::StrCat("bucket ", b, " (", bucket.params.size(), " parameters from '",
                      params_[bucket.params.front()].name, "', ",
                      plan_.slice[b] * plan_.world_size, opts_.bf16_wire ? " x bf16)" : " x fp32)");
}

absl::Status Zero2Reducer::FinishMicroBatch() {
  Check(in_step_, "FinishMicroBatch outside a step (call BeginStep first)");
  if (!failed_.ok()) return failed_;
  if (micro_ + 1 >= opts_.accumulation_steps) {
    failed_ = absl::FailedPreconditionError(absl::StrCat(
        "zero2 reducer: FinishMicroBatch after micro-batch ", micro_ + 1, " of ",
        opts_.accumulation_steps, " of step ", step_, ": the last one ends with FinishStep"));
    in_step_ = false;
    return failed_;
  }
  absl::Status s = ReduceMicroBatch();
  if (!s.ok()) {
    failed_ = s;
    in_step_ = false;
    return s;
  }
  ++micro_;
  ResetMicroBatch();
  return absl::OkStatus();
}

absl::Status Zero2Reducer::FinishStep(StepSyncStats* stats, double* grad_norm) {
  StepSyncStats local;
  if (stats == nullptr) stats = &local;
  *stats = StepSyncStats();
  stats->step = step_;
  if (!failed_.ok()) return failed_;
  if (!in_step_) {
    failed_ = absl::FailedPreconditionError(absl::StrCat(
        "zero2 reducer: FinishStep for step ", step_, " without BeginStep"));
    return failed_;
  }
  absl::Status s;
  if (micro_ + 1 != opts_.accumulation_steps) {
    s = absl::FailedPreconditionError(absl::StrCat(
        "zero2 reducer: FinishStep after micro-batch ", micro_ + 1, " of ",
        opts_.accumulation_steps, " of step ", step_, " (FinishMicroBatch ends the others)"));
  } else {
    s = FinishSync(stats, grad_norm);
  }
  in_step_ = false;
  if (!s.ok()) failed_ = s;
  return s;
}

// Launches the micro-batch's remaining buckets, waits for all of them and adds a later
// micro-batch's reduced gradients to the shard.
absl::Status Zero2Reducer::ReduceMicroBatch() {
  const absl::Time finish_start = opts_.clock->Now();
  const size_t nb = plan_.layout.buckets.size();
  for (size_t t = 0; t < params_.size(); ++t) {
    if (ready_[t]) continue;
    unready_any_[t] = 1;
    // Whatever a slot taken but never marked holds, it reduces as zeros.
    const size_t b = plan_.layout.param_bucket[t];
    if (buffer_of_[b] >= 0 && work_[b] == nullptr) {
      NoteError(&memory_error_,
                memory_->Zero(pool_[buffer_of_[b]].data() + plan_.layout.param_offset[t] -
                                  plan_.layout.buckets[b].offset,
                              params_[t].count * sizeof(float)));
    }
  }
  if (!pending_error_.ok()) return pending_error_;  // the ledger check failed in backward
  RETURN_IF_ERROR(ResolveLedgerCheck());
  std::vector<bool> done_at_finish(nb, false);
  for (size_t b = 0; b < next_bucket_; ++b) done_at_finish[b] = work_[b]->IsDone();
  while (next_bucket_ < nb) Launch(next_bucket_++, /*from_backward=*/false);
  RETURN_IF_ERROR(WaitAll(finish_start, done_at_finish, &step_stats_));
  RETURN_IF_ERROR(memory_error_);
  if (opts_.bf16_wire) {
    RETURN_IF_ERROR(memory_->CastFromBf16(shard_wire_.data(),
                                          micro_ == 0 ? shard_.data() : incoming_.data(),
                                          shard_.size()));
  }
  if (micro_ > 0) RETURN_IF_ERROR(memory_->Add(shard_.data(), incoming_.data(), shard_.size()));
  return absl::OkStatus();
}

absl::Status Zero2Reducer::FinishSync(StepSyncStats* stats, double* grad_norm) {
  const absl::Time finish_start = opts_.clock->Now();
  const size_t nb = plan_.layout.buckets.size();
  RETURN_IF_ERROR(ReduceMicroBatch());
  std::vector<size_t> unready;
  for (size_t t = 0; t < params_.size(); ++t) {
    if (unready_any_[t]) unready.push_back(t);
  }

  // Readiness sentinel and this rank's squared norm, in one all-reduce (sum).
  double squares = 0;
  RETURN_IF_ERROR(memory_->SquaredSum(shard_.data(), shard_.size(), &squares));
  float exchange[2] = {static_cast<float>(unready.size()), static_cast<float>(squares)};
  std::memcpy(exchange_->host(), exchange, sizeof(exchange));
  RETURN_IF_ERROR(exchange_->Upload());
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = kTagZero2Stats;
  absl::Status exchanged =
      comm_->AllReduce(TensorView{exchange_->wire(), 2, DataType::kFloat32}, ReduceOp::kSum, copts)
          ->Wait();
  if (exchanged.ok()) exchanged = exchange_->Download();
  std::memcpy(exchange, exchange_->host(), sizeof(exchange));
  if (!exchanged.ok()) {
    return WithPrefix(exchanged, absl::StrCat("step ", step_,
                                              ": the readiness and gradient-norm all-reduce "
                                              "failed: "));
  }
  // Identical on every rank (an all-reduce result), so every rank takes the same branch.
  if (exchange[0] != 0.0f) {
    if (!opts_.find_unused_parameters) return NameUnready(unready);
    // find_unused_parameters: the unready gradients took part as zeros.
    for (size_t t : unready) stats->unused_parameters.push_back(params_[t].name);
  }
  if (grad_norm != nullptr) *grad_norm = std::sqrt(static_cast<double>(exchange[1]));

  stats->bytes_communicated = step_stats_.bytes_communicated;
  stats->comm_time = step_stats_.comm_time;
  stats->hidden_comm_time = step_stats_.hidden_comm_time;
  stats->exposed_wait_time = step_stats_.exposed_wait_time;
  stats->synced = true;
  stats->buckets = static_cast<int>(nb) * opts_.accumulation_steps;  // reduce-scatters
  stats->buckets_launched_in_backward = launched_in_backward_;
  stats->collectives = static_cast<int>(step_records_.size());
  stats->collective_digest = DigestRecords(step_records_);
  stats->ledger_checked = ledger_checked_this_step_;
  stats->finish_time = opts_.clock->Now() - finish_start;
  ++step_;
  ++steps_done_;
  return absl::OkStatus();
}

// Waits for every bucket (even after a failure: they read the pool and write the shard) and
// frees the pool; adds to the timing stats.
absl::Status Zero2Reducer::WaitAll(absl::Time finish_start,
                                   const std::vector<bool>& done_at_finish, StepSyncStats* stats) {
  absl::Status first_error = wait_error_;
  absl::Duration comm, hidden;
  for (size_t b = 0; b < work_.size(); ++b) {
    absl::Status s = work_[b]->Wait();
    const absl::Time done = opts_.clock->Now();
    if (!s.ok() && first_error.ok()) {
      first_error = WithPrefix(
          s, absl::StrCat("step ", step_, ": reduce-scatter of ", BucketName(b), " failed: "));
    }
    const absl::Duration d = work_[b]->Duration();
    comm += d;
    if (done_at_finish[b]) {
      hidden += d;
    } else if (launch_time_[b] < finish_start) {
      hidden += std::max(absl::ZeroDuration(), d - (done - finish_start));
    }
    stats->bytes_communicated +=
        plan_.slice[b] * plan_.world_size * (opts_.bf16_wire ? sizeof(uint16_t) : sizeof(float));
  }
  stats->exposed_wait_time += opts_.clock->Now() - finish_start;
  stats->comm_time += comm;
  stats->hidden_comm_time += hidden;
  work_.assign(work_.size(), nullptr);
  std::fill(holder_.begin(), holder_.end(), -1);
  std::fill(buffer_of_.begin(), buffer_of_.end(), -1);
  return first_error;
}

absl::Status Zero2Reducer::NameUnready(const std::vector<size_t>& local_unready) {
  const size_t n = params_.size();
  const size_t bytes = (n + 7) / 8;
  const size_t world = plan_.world_size;
  ASSIGN_OR_RETURN(StagedBytes in, StagedBytes::Create(memory_, bytes));
  ASSIGN_OR_RETURN(StagedBytes all, StagedBytes::Create(memory_, bytes * world));
  std::fill_n(in.host(), bytes, 0);
  for (size_t t : local_unready) in.host()[t / 8] |= static_cast<uint8_t>(1u << (t % 8));
  ledger_.Record(CollectiveKind::kAllGather, kTagUnusedBitmap, bytes, DataType::kUInt8);
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = kTagUnusedBitmap;
  absl::Status s = in.Upload();
  if (s.ok()) s = comm_->AllGather(in.view(), all.view(), copts)->Wait();
  if (s.ok()) s = all.Download();
  const uint8_t* out = all.host();
  if (!s.ok()) {
    return WithPrefix(s, absl::StrCat("step ", step_,
                                      ": some rank left parameters without gradient, and the "
                                      "all-gather naming them failed: "));
  }
  std::vector<std::string> per_rank;
  for (size_t r = 0; r < world; ++r) {
    std::vector<std::string> names;
    size_t total = 0;
    for (size_t t = 0; t < n; ++t) {
      if (!(out[r * bytes + t / 8] & (1u << (t % 8)))) continue;
      if (++total <= kMaxNamesPerRank) names.push_back(params_[t].name);
    }
    if (total == 0) continue;
    std::string entry = absl::StrCat("rank ", r, ": ", absl::StrJoin(names, ", "));
    if (total > names.size()) absl::StrAppend(&entry, " and ", total - names.size(), " more");
    per_rank.push_back(std::move(entry));
  }
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat(
          "step ", step_, ": parameters received no gradient (strategy zero2) — ",
          absl::StrJoin(per_rank, "; "),
          ". Set sync.find_unused_parameters: true to reduce them as zeros, or freeze them on "
          "every rank (model.frozen_parameters)")),
      v1::RankFailure::JOB_ERROR);
}

}  // namespace ringleader
