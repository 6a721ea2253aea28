// Hang forensics: given where each rank of an attempt is in its collectives (its trace ring, or
// for a silent rank only the counts of its last report), finds the first collective the ranks
// disagree on, the ranks that never entered it and what the others are doing. Plain C++, no
// clock, no lock.
//
//   first = the oldest collective some answering rank has not completed;
//   a rank "waits in" it when its entry is STARTED (ENQUEUED: queued behind an earlier one);
//   a rank "never entered" it when it answered and its ring ends before it, or when it is
//   silent and its last report had issued fewer collectives (it may have gone further since:
//   the summary says what the figures are).
#ifndef RINGLEADER_COORDINATOR_CORE_HANG_REPORT_H_
#define RINGLEADER_COORDINATOR_CORE_HANG_REPORT_H_

#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

// `ranks` in any order; each answered rank's entries oldest first. Fills every field but
// created_unix_ms. With every rank done with every collective it has issued and all alike, the
// summary says the ranks agree.
v1::HangReport AnalyzeHang(std::vector<v1::RankTrace> ranks);

// "#42 all_reduce bucket 3, fp32, 1.0 MB".
std::string DescribeTraceEntry(const v1::CollectiveTraceEntry& entry);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_HANG_REPORT_H_
