// `ringleader debug JOB`: hang forensics (commands.h).
#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/table.h"

namespace ringleader {
namespace {

const char* StateName(v1::CollectiveTraceEntry::State state) {
  switch (state) {
    case v1::CollectiveTraceEntry::ENQUEUED:
      return "enqueued";
    case v1::CollectiveTraceEntry::STARTED:
      return "started";
    case v1::CollectiveTraceEntry::COMPLETED:
      return "completed";
    case v1::CollectiveTraceEntry::FAILED:
      return "failed";
    default:
      return "?";
  }
}

std::string OpName(v1::CollectiveOp op) {
  std::string name = v1::CollectiveOp_Name(op);  // COLLECTIVE_OP_ALL_REDUCE
  name = name.substr(std::string("COLLECTIVE_OP_").size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

// Milliseconds between two of the rank's microsecond stamps ("-" when either is unknown).
std::string Span(uint64_t from_us, uint64_t to_us) {
  if (from_us == 0 || to_us == 0 || to_us < from_us) return "-";
  return FormatNumber((to_us - from_us) / 1000.0);
}

const v1::CollectiveTraceEntry* EntryAt(const v1::RankTrace& rank, uint64_t sequence) {
  for (const v1::CollectiveTraceEntry& e : rank.entries()) {
    if (e.sequence() == sequence) return &e;
  }
  return nullptr;
}

}  // namespace

int RunDebug(const std::string& job_id, const DebugOptions& options, JobClient& client,
             const CommandEnvironment& env) {
  absl::StatusOr<v1::DebugJobResponse> response = client.Debug(job_id, options.wait_ms);
  if (!response.ok()) return ReportError(response.status(), "cannot debug job " + job_id, env);
  if (env.json) return PrintJson(*response, env);
  const v1::HangReport& report = response->report();
  *env.out << "job " << job_id << ": " << report.summary() << "\n\n";

  std::vector<std::string> headers = {"RANK", "ANSWERED", "SILENT", "ISSUED", "COMPLETED"};
  if (report.ranks_disagree()) headers.push_back(absl::StrCat("AT_#", report.first_sequence()));
  Table ranks(std::move(headers));
  for (const v1::RankTrace& rank : report.ranks()) {
    std::string there = "-";
    if (const v1::CollectiveTraceEntry* e = EntryAt(rank, report.first_sequence());
        report.ranks_disagree() && e != nullptr) {
      there = StateName(e->state());
    } else if (report.ranks_disagree() && rank.collectives_issued() <= report.first_sequence()) {
      there = "never entered";
    }
    std::vector<std::string> row = {absl::StrCat(rank.rank()), rank.answered() ? "yes" : "no",
                                    rank.silent_ms() < 0 ? "-" : FormatAgeMillis(rank.silent_ms()),
                                    absl::StrCat(rank.collectives_issued()),
                                    absl::StrCat(rank.collectives_completed())};
    if (report.ranks_disagree()) row.push_back(there);
    ranks.AddRow(std::move(row));
  }
  *env.out << ranks.Render();

  for (const v1::RankTrace& rank : report.ranks()) {
    if (!rank.answered()) continue;
    const int shown = options.entries == 0
                          ? rank.entries_size()
                          : std::min<int>(rank.entries_size(), static_cast<int>(options.entries));
    *env.out << "\nrank " << rank.rank() << ": last " << shown << " of " << rank.entries_size()
             << " collectives\n";
    Table entries({"SEQ", "STEP", "OP", "BUCKET", "DTYPE", "BYTES", "STATE", "QUEUED_MS",
                   "RAN_MS"},
                  "  ");
    for (int i = rank.entries_size() - shown; i < rank.entries_size(); ++i) {
      const v1::CollectiveTraceEntry& e = rank.entries(i);
      entries.AddRow({absl::StrCat(e.sequence()), absl::StrCat(e.step()), OpName(e.op()),
                      e.bucket() >= 0 ? absl::StrCat(e.bucket()) : "-", e.dtype(),
                      absl::StrCat(e.bytes()), StateName(e.state()),
                      Span(e.enqueued_us(), e.started_us()),
                      Span(e.started_us(), e.completed_us())});
    }
    *env.out << entries.Render();
  }
  return kExitOk;
}

}  // namespace ringleader
