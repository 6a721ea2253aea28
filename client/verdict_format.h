// Text of the coordinator's judgement of a job (JobStatus.verdict, .alarms, .stragglers) for
// `ringleader watch` and `ringleader status`. The coordinator's step judge does every check;
// nothing here recomputes one: these functions only format what it decided.
#ifndef RINGLEADER_CLIENT_VERDICT_FORMAT_H_
#define RINGLEADER_CLIENT_VERDICT_FORMAT_H_

#include <string>

#include "google/protobuf/repeated_field.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// "PASS", "WARN", "FAIL"; "not judged yet" for RESULT_UNSPECIFIED; "UNKNOWN(n)" otherwise.
std::string VerdictResultName(v1::Verdict::Result result);

// One line: "FAIL (8 steps judged, first bad step 3, 5120 train samples/s)"; the first bad
// step only when there is one, the rate only when measured.
std::string SummarizeVerdict(const v1::Verdict& verdict);

// One line: "NOT_SYNCHRONIZED at step 3, rank 1: <message> (+5 later steps, last at step 8)
// [failed the job]"; "[warning]" instead when the job's policy kept it running.
std::string FormatAlarm(const v1::Alarm& alarm);

// Table of the ranks' figures at one step (RANK, LOSS, LOCAL_GRAD, SYNCED_GRAD, DRIFT, STEP_MS;
// DRIFT "-" where not measured), each line starting with `indent`; "" when there are none.
std::string FormatRankFigures(const google::protobuf::RepeatedPtrField<v1::RankStepFigures>& ranks,
                              const std::string& indent);

// Table of straggler scores (rank, score, median step/compute/comm ms, ratio to median,
// flagged, suspected cause), each line starting with `indent`.
std::string FormatStragglers(const google::protobuf::RepeatedPtrField<v1::StragglerScore>& scores,
                             const std::string& indent);

// Whether the run passed: the job SUCCEEDED and the coordinator's verdict is PASS or WARN.
bool RunPassed(const v1::JobStatus& job);

// The block `watch` prints once the job ended: state, final accuracy, the first bad step and
// the last judged step with per-rank tables, every alarm, and a last line "result: ..." that
// says why the run did not pass, or that it passed with warnings.
std::string FormatFinalVerdict(const v1::JobStatus& job);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_VERDICT_FORMAT_H_
