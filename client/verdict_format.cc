#include "client/verdict_format.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/table.h"
#include "common/states.h"

namespace ringleader {
namespace {

// Grad norms get enough digits to show a relative difference near the 1e-6 tolerance.
constexpr int kNormDigits = 8;

// "5120" for large rates, "12.5" for small ones.
std::string FormatRate(double per_second) {
  return per_second >= 100 ? absl::StrFormat("%.0f", per_second) : FormatNumber(per_second, 3);
}

// "rank 1", "ranks 0, 2", "no rank".
std::string FormatRanks(const google::protobuf::RepeatedField<uint32_t>& ranks) {
  if (ranks.empty()) return "no rank";
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// "1 warning", "2 warnings".
std::string Count(uint64_t n, const std::string& noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

int FailedAlarms(const v1::JobStatus& job) {
  return static_cast<int>(std::count_if(job.alarms().begin(), job.alarms().end(),
                                        [](const v1::Alarm& a) { return a.failed_job(); }));
}

// Why a run that did not pass did not, or what to notice about one that did; "" for a clean
// pass.
std::string ResultNote(const v1::JobStatus& job) {
  const v1::Verdict::Result result = job.verdict().result();
  if (job.state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::StrCat(": the job ended ", JobStateName(job.state()));
  }
  if (result == v1::Verdict::RESULT_UNSPECIFIED) return ": the coordinator judged no step";
  if (result == v1::Verdict::FAIL) return ": a failed check (see the alarms above)";
  if (result == v1::Verdict::WARN) {
    const int warnings = job.alarms_size() - FailedAlarms(job);
    return absl::StrCat(": the job succeeded with ", Count(warnings, "warning"),
                        " (see the alarms above)");
  }
  return "";
}

}  // namespace

std::string VerdictResultName(v1::Verdict::Result result) {
  switch (result) {
    case v1::Verdict::RESULT_UNSPECIFIED:
      return "not judged yet";
    case v1::Verdict::PASS:
      return "PASS";
    case v1::Verdict::WARN:
      return "WARN";
    case v1::Verdict::FAIL:
      return "FAIL";
    default:
      return absl::StrCat("UNKNOWN(", static_cast<int>(result), ")");
  }
}

std::string SummarizeVerdict(const v1::Verdict& verdict) {
  std::string text = absl::StrCat(VerdictResultName(verdict.result()), " (",
                                  Count(verdict.steps_judged(), "step"), " judged");
  if (verdict.first_bad_step() > 0) {
    absl::StrAppend(&text, ", first bad step ", verdict.first_bad_step());
  }
  if (verdict.samples_per_second() > 0) {
    absl::StrAppend(&text, ", ", FormatRate(verdict.samples_per_second()), " train samples/s");
  }
  return text + ")";
}

std::string FormatAlarm(const v1::Alarm& alarm) {
  std::string text = absl::StrCat(v1::Alarm::Kind_Name(alarm.kind()), " at step ", alarm.step(),
                                  ", ", FormatRanks(alarm.ranks()));
  if (!alarm.tensor().empty()) absl::StrAppend(&text, ", tensor ", alarm.tensor());
  if (!alarm.message().empty()) absl::StrAppend(&text, ": ", alarm.message());
  if (alarm.repeats() > 0) {
    absl::StrAppend(&text, " (+", Count(alarm.repeats(), "later step"), ", last at step ",
                    alarm.last_step(), ")");
  }
  return absl::StrCat(text, alarm.failed_job() ? "  [failed the job]" : "  [warning]");
}

std::string FormatRankFigures(const google::protobuf::RepeatedPtrField<v1::RankStepFigures>& ranks,
                              const std::string& indent) {
  if (ranks.empty()) return "";
  Table table({"RANK", "LOSS", "LOCAL_GRAD", "SYNCED_GRAD", "DRIFT", "STEP_MS"}, indent);
  for (const v1::RankStepFigures& rank : ranks) {
    table.AddRow({absl::StrCat(rank.rank()), FormatNumber(rank.loss()),
                  FormatNumber(rank.local_grad_norm(), kNormDigits),
                  FormatNumber(rank.synced_grad_norm(), kNormDigits),
                  rank.has_drift() ? FormatNumber(rank.drift(), 3) : "-",
                  FormatNumber(rank.step_ms())});
  }
  return table.Render();
}

std::string FormatStragglers(const google::protobuf::RepeatedPtrField<v1::StragglerScore>& scores,
                             const std::string& indent) {
  Table table({"RANK", "SCORE", "WAIT_CAUSED_MS", "LAST_ARRIVAL", "MEDIAN_STEP_MS",
               "MEDIAN_COMPUTE_MS", "MEDIAN_COMM_MS", "RATIO", "FLAGGED", "SUSPECTED_CAUSE"},
              indent);
  for (const v1::StragglerScore& score : scores) {
    table.AddRow({absl::StrCat(score.rank()), FormatNumber(score.score(), 3),
                  FormatNumber(score.mean_wait_caused_ms()),
                  FormatNumber(score.last_arrival_fraction(), 3),
                  FormatNumber(score.median_step_ms()), FormatNumber(score.median_compute_ms()),
                  FormatNumber(score.median_comm_ms()), FormatNumber(score.ratio_to_median(), 3),
                  score.flagged() ? "yes" : "no",
                  score.suspected_cause().empty() ? "-" : score.suspected_cause()});
  }
  return table.Render();
}

bool RunPassed(const v1::JobStatus& job) {
  const v1::Verdict::Result result = job.verdict().result();
  return job.state() == v1::JOB_STATE_SUCCEEDED &&
         (result == v1::Verdict::PASS || result == v1::Verdict::WARN);
}

std::string FormatFinalVerdict(const v1::JobStatus& job) {
  const v1::Verdict& verdict = job.verdict();
  std::string text = absl::StrCat("verdict\n  state           ", JobStateName(job.state()),
                                  job.state() == v1::JOB_STATE_SUCCEEDED ? "" : "  [FAIL]", "\n");
  if (job.epochs_size() > 0) {
    const v1::EpochReport& last = *std::max_element(
        job.epochs().begin(), job.epochs().end(),
        [](const v1::EpochReport& a, const v1::EpochReport& b) { return a.epoch() < b.epoch(); });
    absl::StrAppend(&text, absl::StrFormat("  final accuracy  %.4f (epoch %d)\n",
                                           last.test_accuracy(), last.epoch()));
  } else {
    absl::StrAppend(&text, "  final accuracy  - (no epoch finished)\n");
  }
  if (verdict.first_bad_step() == 0) {
    absl::StrAppend(&text, "  first bad step  none\n");
  } else {
    absl::StrAppend(&text, "  first bad step  ", verdict.first_bad_step(), "\n",
                    FormatRankFigures(verdict.first_bad(), "    "));
  }
  if (verdict.last_step() == 0) {
    absl::StrAppend(&text, "  last step       none judged\n");
  } else {
    absl::StrAppend(&text, "  last step       ", verdict.last_step(), "\n",
                    FormatRankFigures(verdict.last(), "    "));
  }
  if (job.alarms_size() == 0) {
    absl::StrAppend(&text, "  alarms          none\n");
  } else {
    const int failed = FailedAlarms(job);
    absl::StrAppend(&text, "  alarms          ", job.alarms_size(), " (", failed,
                    " failed the job, ", Count(job.alarms_size() - failed, "warning"), ")\n");
    for (const v1::Alarm& alarm : job.alarms()) {
      absl::StrAppend(&text, "    ", FormatAlarm(alarm), "\n");
    }
  }
  absl::StrAppend(&text, "result: ", SummarizeVerdict(verdict), ResultNote(job), "\n");
  return text;
}

}  // namespace ringleader
