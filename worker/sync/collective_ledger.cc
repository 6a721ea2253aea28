#include "worker/sync/collective_ledger.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr size_t kSummaryBytes = 24;  // u64 step, u64 count, u64 digest

void PutU64(uint64_t v, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU32(uint32_t v, uint8_t* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetU64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}
uint32_t GetU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}

std::string TagName(int32_t bucket) {
  switch (bucket) {
    case kTagNone:
      return "untagged";
    case kTagUnusedBitmap:
      return "unused-parameter bitmap";
    case kTagLayoutOrder:
      return "bucket-order broadcast";
    case kTagBuffer:
      return "buffer";
    case kTagDrift:
      return "drift check";
    case kTagShardGather:
      return "parameter-shard gather";
    case kTagMomentumGather:
      return "momentum-shard gather";
    case kTagZero2Stats:
      return "zero2 readiness and gradient norm";
    default:
      return bucket >= 0 ? absl::StrCat("bucket ", bucket) : absl::StrCat("tag ", bucket);
  }
}

// The status of a collective, with what it was for.
absl::Status Annotate(const absl::Status& s, int64_t step, const char* what) {
  if (s.ok()) return s;
  return WithPrefix(s, absl::StrCat("ledger check at step ", step, " (", what, "): "));
}

}  // namespace


std::string DescribeRecord(const CollectiveRecord& r) {
  if (r.kind == CollectiveKind::kNone) return "nothing";
  return absl::StrCat("#", r.sequence, " ", CollectiveKindName(r.kind), " ", TagName(r.bucket),
                      ", ", r.count, " x ", DataTypeName(r.dtype));
}

void EncodeRecord(const CollectiveRecord& r, uint8_t* out) {
  PutU64(r.sequence, out);
  PutU32(static_cast<uint32_t>(r.kind), out + 8);
  PutU32(static_cast<uint32_t>(r.bucket), out + 12);
  PutU64(r.count, out + 16);
  PutU32(static_cast<uint32_t>(r.dtype), out + 24);
  PutU32(0, out + 28);
}

CollectiveRecord DecodeRecord(const uint8_t* in) {
  CollectiveRecord r;
  r.sequence = GetU64(in);
  r.kind = static_cast<CollectiveKind>(GetU32(in + 8));
  r.bucket = static_cast<int32_t>(GetU32(in + 12));
  r.count = GetU64(in + 16);
  r.dtype = static_cast<DataType>(GetU32(in + 24));
  return r;
}

uint64_t DigestRecords(const std::vector<CollectiveRecord>& records) {
  uint64_t h = kFnvOffset;
  uint8_t buf[kRecordWireBytes];
  for (const CollectiveRecord& r : records) {
    EncodeRecord(r, buf);
    for (uint8_t byte : buf) {
      h ^= byte;
      h *= kFnvPrime;
    }
  }
  return h;
}

std::string DescribeFirstDivergence(int64_t step,
                                    const std::vector<std::vector<CollectiveRecord>>& per_rank) {
  if (per_rank.empty()) return "";
  size_t longest = 0;
  for (const auto& records : per_rank) longest = std::max(longest, records.size());
  const CollectiveRecord nothing;
  auto at = [&](size_t rank, size_t i) -> const CollectiveRecord& {
    return i < per_rank[rank].size() ? per_rank[rank][i] : nothing;
  };
  for (size_t i = 0; i < longest; ++i) {
    std::vector<std::string> differing;
    std::vector<int> agreeing;
    for (size_t rank = 0; rank < per_rank.size(); ++rank) {
      if (at(rank, i) == at(0, i)) {
        agreeing.push_back(static_cast<int>(rank));
      } else {
        differing.push_back(absl::StrCat("rank ", rank, " issued ", DescribeRecord(at(rank, i))));
      }
    }
    if (differing.empty()) continue;
    return absl::StrCat(
        "collective desync at step ", step, ": the first divergent collective is entry ", i,
        " since the last ledger check: rank 0 issued ", DescribeRecord(at(0, i)), "; ",
        absl::StrJoin(differing, "; "), ". Ranks that agree with rank 0: {",
        absl::StrJoin(agreeing, ", "),
        "}. Every rank must issue the same collectives in the same order: look for "
        "rank-dependent control flow or configuration (bucket sizes, comm dtype, gradient "
        "accumulation, parameter lists)");
  }
  return "";
}

CollectiveRecord CollectiveLedger::Record(CollectiveKind kind, int32_t bucket, size_t count,
                                          DataType dtype) {
  absl::MutexLock lock(&mu_);
  CollectiveRecord r;
  r.sequence = next_sequence_++;
  r.kind = kind;
  r.bucket = bucket;
  r.count = count;
  r.dtype = dtype;
  window_.push_back(r);
  return r;
}

std::vector<CollectiveRecord> CollectiveLedger::TakeWindow() {
  absl::MutexLock lock(&mu_);
  std::vector<CollectiveRecord> out;
  out.swap(window_);
  return out;
}

uint64_t CollectiveLedger::size() const {
  absl::MutexLock lock(&mu_);
  return next_sequence_;
}

LedgerCheck::LedgerCheck(Collective* comm, int64_t step, std::vector<CollectiveRecord> window,
                         absl::Duration timeout, TensorMemory* memory)
    : comm_(comm),
      step_(step),
      window_(std::move(window)),
      timeout_(timeout),
      memory_(memory != nullptr ? memory : HostMemory()) {}

LedgerCheck::~LedgerCheck() {
  // The all-gather writes into our buffers: they must outlive it.
  if (summary_work_ != nullptr) summary_work_->Wait().IgnoreError();
}

std::unique_ptr<LedgerCheck> LedgerCheck::Start(Collective* comm, int64_t step,
                                                std::vector<CollectiveRecord> window,
                                                absl::Duration timeout, TensorMemory* memory) {
  std::unique_ptr<LedgerCheck> check(
      new LedgerCheck(comm, step, std::move(window), timeout, memory));
  check->start_error_ = Annotate(check->StartSummary(), step, "staging the summary");
  return check;
}

absl::Status LedgerCheck::StartSummary() {
  ASSIGN_OR_RETURN(StagedBytes in, StagedBytes::Create(memory_, kSummaryBytes));
  ASSIGN_OR_RETURN(StagedBytes out,
                   StagedBytes::Create(memory_, kSummaryBytes * comm_->world_size()));
  summary_in_ = std::make_unique<StagedBytes>(std::move(in));
  summary_out_ = std::make_unique<StagedBytes>(std::move(out));
  PutU64(static_cast<uint64_t>(step_), summary_in_->host());
  PutU64(window_.size(), summary_in_->host() + 8);
  PutU64(DigestRecords(window_), summary_in_->host() + 16);
  RETURN_IF_ERROR(summary_in_->Upload());
  CollectiveOptions copts;
  copts.timeout = timeout_;
  summary_work_ = comm_->AllGather(summary_in_->view(), summary_out_->view(), copts);
  return absl::OkStatus();
}

absl::Status LedgerCheck::Finish() {
  if (!finished_) {
    result_ = FinishOnce();
    finished_ = true;
  }
  return result_;
}

absl::Status LedgerCheck::FinishOnce() {
  RETURN_IF_ERROR(start_error_);
  absl::Status waited = summary_work_->Wait();
  if (waited.ok()) waited = summary_out_->Download();
  RETURN_IF_ERROR(Annotate(waited, step_, "summary all-gather"));
  const int n = comm_->world_size();
  std::vector<uint64_t> steps(n), counts(n), digests(n);
  bool agree = true;
  for (int r = 0; r < n; ++r) {
    const uint8_t* s = summary_out_->host() + r * kSummaryBytes;
    steps[r] = GetU64(s);
    counts[r] = GetU64(s + 8);
    digests[r] = GetU64(s + 16);
    agree = agree && steps[r] == steps[0] && counts[r] == counts[0] && digests[r] == digests[0];
  }
  if (agree) return absl::OkStatus();

  // Every rank saw the same summaries, so every rank takes this branch: the record all-gather
  // below is issued by all of them.
  const uint64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<std::vector<CollectiveRecord>> per_rank(n);
  if (longest > 0) {
    ASSIGN_OR_RETURN(StagedBytes in, StagedBytes::Create(memory_, longest * kRecordWireBytes));
    for (size_t i = 0; i < window_.size(); ++i) {
      EncodeRecord(window_[i], in.host() + i * kRecordWireBytes);
    }
    // Padding entries decode as kind kNone ("issued nothing here").
    ASSIGN_OR_RETURN(StagedBytes out, StagedBytes::Create(memory_, in.size() * n));
    RETURN_IF_ERROR(Annotate(in.Upload(), step_, "staging the records"));
    CollectiveOptions copts;
    copts.timeout = timeout_;
    absl::Status waited = comm_->AllGather(in.view(), out.view(), copts)->Wait();
    if (waited.ok()) waited = out.Download();
    RETURN_IF_ERROR(Annotate(waited, step_, "record all-gather"));
    for (int r = 0; r < n; ++r) {
      for (uint64_t i = 0; i < counts[r]; ++i) {
        per_rank[r].push_back(DecodeRecord(out.host() + (r * longest + i) * kRecordWireBytes));
      }
    }
  }
  std::string divergence = DescribeFirstDivergence(step_, per_rank);
  // A desync is the job's (its code issues different collectives): JOB_ERROR.
  if (!divergence.empty()) {
    return WithFailureKind(absl::FailedPreconditionError(divergence), v1::RankFailure::JOB_ERROR);
  }
  std::vector<std::string> step_list;
  for (int r = 0; r < n; ++r) step_list.push_back(absl::StrCat("rank ", r, ": ", steps[r]));
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat(
          "collective desync at step ", step_,
          ": the ranks issued the same collectives but are at different steps (",
          absl::StrJoin(step_list, ", "), "); every rank must sync the same step")),
      v1::RankFailure::JOB_ERROR);
}

}  // namespace ringleader
