#include "coordinator/core/hang_report.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

const char* OpName(v1::CollectiveOp op) {
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return "all_reduce";
    case v1::COLLECTIVE_OP_BROADCAST:
      return "broadcast";
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return "all_gather";
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      return "reduce_scatter";
    case v1::COLLECTIVE_OP_BARRIER:
      return "barrier";
    default:
      return "collective";
  }
}

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1u << 20)) return absl::StrFormat("%.1f MB", bytes / 1048576.0);
  if (bytes >= 1024) return absl::StrFormat("%.1f KB", bytes / 1024.0);
  return absl::StrCat(bytes, " B");
}

std::string Seconds(int64_t ms) { return absl::StrFormat("%.1f s", ms / 1000.0); }

// The rank's entry for `sequence`, or null.
const v1::CollectiveTraceEntry* EntryOf(const v1::RankTrace& rank, uint64_t sequence) {
  for (const v1::CollectiveTraceEntry& e : rank.entries()) {
    if (e.sequence() == sequence) return &e;
  }
  return nullptr;
}

// "its last collective was #41" / "it had issued none".
std::string LastIssued(const v1::RankTrace& rank) {
  return rank.collectives_issued() == 0
             ? std::string("it had issued none")
             : absl::StrCat("its last collective was #", rank.collectives_issued() - 1);
}

std::string RankNames(const std::vector<uint32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

}  // namespace

std::string DescribeTraceEntry(const v1::CollectiveTraceEntry& e) {
  return absl::StrCat("#", e.sequence(), " ", OpName(e.op()),
                      e.bucket() >= 0 ? absl::StrCat(" bucket ", e.bucket()) : std::string(),
                      ", ", e.dtype(), ", ", Bytes(e.bytes()));
}

v1::HangReport AnalyzeHang(std::vector<v1::RankTrace> ranks) {
  std::sort(ranks.begin(), ranks.end(),
            [](const v1::RankTrace& a, const v1::RankTrace& b) { return a.rank() < b.rank(); });
  v1::HangReport report;
  // The first collective some answering rank has not completed, and the furthest any rank got.
  uint64_t first = kNone;
  uint64_t furthest = 0;
  for (const v1::RankTrace& r : ranks) {
    furthest = std::max(furthest, r.collectives_issued());
    if (!r.answered()) continue;
    for (const v1::CollectiveTraceEntry& e : r.entries()) {
      if (e.state() != v1::CollectiveTraceEntry::COMPLETED) {
        first = std::min(first, e.sequence());
        break;
      }
    }
  }
  // Every answering rank completed all it issued: they disagree only if some issued more.
  if (first == kNone) {
    uint64_t fewest = kNone;
    for (const v1::RankTrace& r : ranks) fewest = std::min(fewest, r.collectives_issued());
    if (fewest == kNone || fewest == furthest) {
      report.set_summary(absl::StrCat("the ranks agree: each has completed every collective it "
                                      "issued (", furthest, ")"));
      for (v1::RankTrace& r : ranks) *report.add_ranks() = std::move(r);
      return report;
    }
    first = fewest;
  }
  report.set_ranks_disagree(true);
  report.set_first_sequence(first);

  const v1::CollectiveTraceEntry* what = nullptr;
  std::vector<uint32_t> waiting, queued, failed, done;
  std::vector<std::string> absent;
  for (const v1::RankTrace& r : ranks) {
    const v1::CollectiveTraceEntry* e = r.answered() ? EntryOf(r, first) : nullptr;
    if (e != nullptr && what == nullptr) what = e;
    if (r.answered()) {
      if (e == nullptr && r.collectives_issued() <= first) {
        report.add_never_entered(r.rank());
        absent.push_back(
            absl::StrCat("rank ", r.rank(), " never entered it (", LastIssued(r), ")"));
      } else if (e != nullptr && e->state() == v1::CollectiveTraceEntry::STARTED) {
        waiting.push_back(r.rank());
      } else if (e != nullptr && e->state() == v1::CollectiveTraceEntry::ENQUEUED) {
        queued.push_back(r.rank());
      } else if (e != nullptr && e->state() == v1::CollectiveTraceEntry::FAILED) {
        failed.push_back(r.rank());
      } else {
        done.push_back(r.rank());
      }
      continue;
    }
    // Silent: only the counts of its last report are known.
    if (r.collectives_issued() <= first) {
      report.add_never_entered(r.rank());
      absent.push_back(absl::StrCat("rank ", r.rank(), " never entered it (silent ",
                                    Seconds(r.silent_ms()), "; when last heard from, ",
                                    LastIssued(r), ")"));
    } else {
      absent.push_back(absl::StrCat("rank ", r.rank(), " is silent (", Seconds(r.silent_ms()),
                                    ") and had issued it when last heard from"));
    }
  }
  std::vector<std::string> parts;
  parts.insert(parts.end(), absent.begin(), absent.end());
  if (!waiting.empty()) parts.push_back(absl::StrCat(RankNames(waiting), " wait in it"));
  if (!queued.empty()) {
    parts.push_back(absl::StrCat(RankNames(queued), " queued it behind an earlier collective"));
  }
  if (!failed.empty()) {
    parts.push_back(absl::StrCat(RankNames(failed), " waited in it and gave up (failed)"));
  }
  if (!done.empty()) parts.push_back(absl::StrCat(RankNames(done), " completed it"));
  report.set_summary(absl::StrCat(
      "collective ", what != nullptr ? DescribeTraceEntry(*what) : absl::StrCat("#", first), ": ",
      absl::StrJoin(parts, "; ")));
  for (v1::RankTrace& r : ranks) *report.add_ranks() = std::move(r);
  return report;
}

}  // namespace ringleader
