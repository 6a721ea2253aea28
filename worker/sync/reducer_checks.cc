// The reducer's cross-rank checks: the collective ledger check of each sync micro-batch and
// the naming of unready parameters (see reducer.h). Their small host-side exchanges go through
// StagedBytes, so they run on host and device memory alike.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/sync/reducer.h"

namespace ringleader {
namespace {

// Names listed per rank in the unused-parameter error before "... and N more".
constexpr size_t kMaxNamesPerRank = 10;

}  // namespace

void Reducer::StartSyncMicroBatch() {
  syncing_ = true;
  const size_t nb = layout_.buckets.size();
  bucket_pending_.resize(nb);
  for (size_t b = 0; b < nb; ++b) bucket_pending_[b] = layout_.buckets[b].params.size();
  bucket_work_.assign(nb, nullptr);
  bucket_launch_time_.assign(nb, absl::InfinitePast());
  next_bucket_ = 0;
  launched_in_backward_ = 0;
  ready_order_.clear();
  step_records_.clear();
  pending_error_ = absl::OkStatus();
  ledger_checked_this_step_ = false;
  if (!failed_.ok()) return;

  // Record now what this step will issue, so the check below covers it before it goes out.
  if (extra_bucket_for_test_ > 0) {
    RecordForStep(CollectiveKind::kAllReduce, static_cast<int32_t>(nb), extra_bucket_for_test_,
                  DataType::kFloat32);
  }
  for (size_t b = 0; b < nb; ++b) {
    RecordForStep(CollectiveKind::kAllReduce, static_cast<int32_t>(b), layout_.collective_count(b),
                  opts_.comm_dtype);
  }
  const int interval = opts_.ledger_check_interval_steps;
  ledger_check_.reset();
  if (interval > 0 && synced_steps_ % interval == 0) {
    // Runs during the forward pass; waited for before the first bucket goes out.
    ledger_check_ = LedgerCheck::Start(comm_, step_, ledger_.TakeWindow(), opts_.timeout, memory_);
  } else if (interval == 0) {
    ledger_.TakeWindow();  // never compared: do not let the window grow
  }
  ledger_check_resolved_ = false;
}

absl::Status Reducer::ResolveLedgerCheck() {
  if (ledger_check_resolved_) return absl::OkStatus();
  ledger_check_resolved_ = true;
  absl::Status s = ledger_check_ != nullptr ? ledger_check_->Finish() : absl::OkStatus();
  ledger_checked_this_step_ = ledger_check_ != nullptr && s.ok();
  if (s.ok() && extra_bucket_for_test_ > 0) {
    // Only reached when the check is off or not due: the test hook then really issues the
    // extra collective (and the ranks desynchronise, as they would in production).
    absl::StatusOr<TensorBuffer<float>> buffer =
        TensorBuffer<float>::Allocate(memory_, extra_bucket_for_test_);
    if (!buffer.ok()) return buffer.status();
    extra_bucket_buffer_ = std::move(*buffer);
    RETURN_IF_ERROR(memory_->Zero(extra_bucket_buffer_.data(), extra_bucket_buffer_.bytes()));
    CollectiveOptions copts;
    copts.timeout = opts_.timeout;
    copts.bucket = static_cast<int>(layout_.buckets.size());
    extra_bucket_work_ = comm_->AllReduce(
        TensorView{extra_bucket_buffer_.data(), extra_bucket_buffer_.size(), DataType::kFloat32},
        ReduceOp::kAvg, copts);
  }
  extra_bucket_for_test_ = 0;
  return s;
}

absl::Status Reducer::CheckUnready(const std::vector<size_t>& local_unready) {
  const size_t n = params_.size();
  const size_t bytes = (n + 7) / 8;
  const int world = comm_->world_size();
  ASSIGN_OR_RETURN(StagedBytes in, StagedBytes::Create(memory_, bytes));
  ASSIGN_OR_RETURN(StagedBytes out, StagedBytes::Create(memory_, bytes * world));
  for (size_t i : local_unready) in.host()[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  RETURN_IF_ERROR(in.Upload());
  RecordForStep(CollectiveKind::kAllGather, kTagUnusedBitmap, bytes, DataType::kUInt8);
  CollectiveOptions copts;
  copts.timeout = opts_.timeout;
  copts.bucket = kTagUnusedBitmap;
  absl::Status s = comm_->AllGather(in.view(), out.view(), copts)->Wait();
  if (s.ok()) s = out.Download();
  if (!s.ok()) {
    return WithPrefix(s, absl::StrCat("step ", step_,
                                      ": some rank left parameters without gradient, and the "
                                      "all-gather naming them failed: "));
  }
  std::vector<std::string> per_rank;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> names;
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!(out.host()[r * bytes + i / 8] & (1u << (i % 8)))) continue;
      if (++total <= kMaxNamesPerRank) names.push_back(params_[i].name);
    }
    if (total == 0) continue;
    std::string entry = absl::StrCat("rank ", r, ": ", absl::StrJoin(names, ", "));
    if (total > names.size()) absl::StrAppend(&entry, " and ", total - names.size(), " more");
    per_rank.push_back(std::move(entry));
  }
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat(
          "step ", step_, ": parameters received no gradient in the step's sync micro-batch (",
          "micro-batch ", opts_.gradient_accumulation_steps, " of ",
          opts_.gradient_accumulation_steps, ") — ", absl::StrJoin(per_rank, "; "),
          ". Every rank must reduce every parameter each step: set sync.find_unused_parameters: "
          "true, or freeze them on every rank")),
      v1::RankFailure::JOB_ERROR);
}

}  // namespace ringleader
