// `ringleader logs`: the ranks' output as the coordinator keeps it (GetLogs, read from the
// cursors until an answer brings nothing new), optionally only the last N lines of each rank,
// and with --follow the new output as it arrives (long polls from the cursors) until the attempt
// is over, then the job's next generations until the job is over.
#include <algorithm>
#include <map>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "common/states.h"

namespace ringleader {
namespace {

bool Transient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

// The last `n` lines of `text` (an unfinished last line counts as one).
absl::string_view LastLines(absl::string_view text, int64_t n) {
  if (n <= 0) return absl::string_view();
  size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') --start;  // the last line's own newline
  int64_t found = 0;
  for (; start > 0; --start) {
    if (text[start - 1] == '\n' && ++found == n) break;
  }
  return text.substr(start);
}

// Prints the ranks' output: one rank's raw bytes, or every rank's lines prefixed "[rank R] " (an
// unfinished line waits, per rank, for the rest of it).
class LogPrinter {
 public:
  LogPrinter(std::ostream* out, bool prefix) : out_(out), prefix_(prefix) {}

  // `data` continues what was printed of `rank`.
  void Print(uint32_t rank, absl::string_view data) {
    if (data.empty()) return;
    if (!prefix_) {
      out_->write(data.data(), static_cast<std::streamsize>(data.size()));
      mid_line_ = data.back() != '\n';
      return;
    }
    std::string& partial = partial_[rank];
    partial.append(data.data(), data.size());
    size_t start = 0;
    for (size_t newline; (newline = partial.find('\n', start)) != std::string::npos;
         start = newline + 1) {
      *out_ << "[rank " << rank << "] ";
      out_->write(partial.data() + start, static_cast<std::streamsize>(newline + 1 - start));
    }
    partial.erase(0, start);
  }

  // A line of its own, after every unfinished line was ended.
  void Line(const std::string& text) {
    EndLines();
    if (mid_line_) *out_ << "\n";
    mid_line_ = false;
    *out_ << text << "\n";
  }

  // Ends the unfinished lines of the prefixed output (a raw output stays as it was).
  void EndLines() {
    for (auto& [rank, partial] : partial_) {
      if (!partial.empty()) *out_ << "[rank " << rank << "] " << partial << "\n";
      partial.clear();
    }
  }

 private:
  std::ostream* const out_;
  const bool prefix_;
  std::map<uint32_t, std::string> partial_;  // by rank, when prefixed
  bool mid_line_ = false;                    // raw output ended without a newline
};

class LogsReader {
 public:
  LogsReader(const std::string& job_id, const LogsOptions& options, JobClient& client,
             const CommandEnvironment& env)
      : job_id_(job_id),
        options_(options),
        client_(client),
        env_(env),
        printer_(env.out, !options.rank.has_value()),
        generation_(options.generation) {}

  int Run() {
    // What the coordinator keeps, in as many answers as it takes.
    collecting_ = options_.tail >= 0;
    v1::GetLogsResponse last;
    do {
      absl::StatusOr<v1::GetLogsResponse> answer = Fetch(absl::ZeroDuration());
      if (!answer.ok()) return Failed(answer.status());
      last = std::move(*answer);
      generation_ = last.generation();  // "the latest" is pinned: cursors belong to it
      Show(last);
    } while (last.chunks_size() > 0);
    if (collecting_) {
      collecting_ = false;
      if (env_.json) {
        PrintTailsJson(last.generation());
      } else {
        for (const auto& [rank, text] : tails_) {
          printer_.Print(rank, LastLines(text, options_.tail));
        }
      }
    }
    if (!options_.follow) {
      printer_.EndLines();
      return kExitOk;
    }
    while (true) {
      if (last.generation() == 0 || last.attempt_over()) {
        printer_.EndLines();
        // A generation asked for by number ends with its attempt.
        if (last.job_over() || options_.generation != 0) return kExitOk;
        absl::StatusOr<uint64_t> next = NextGeneration(last.generation());
        if (!next.ok()) return Failed(next.status());
        if (*next == 0) return kExitOk;  // the job ended without another attempt
        if (last.generation() != 0 && !env_.json) {
          printer_.Line(absl::StrCat("--- generation ", *next, " ---"));
        }
        generation_ = *next;
        cursors_.clear();
      }
      absl::StatusOr<v1::GetLogsResponse> answer = Fetch(options_.poll_wait);
      if (!answer.ok()) return Failed(answer.status());
      last = std::move(*answer);
      Show(last);
    }
  }

 private:
  int Failed(const absl::Status& status) {
    printer_.EndLines();
    return ReportError(status, "cannot get the logs of job " + job_id_, env_);
  }

  // `call()` again while it fails with UNAVAILABLE or DEADLINE_EXCEEDED, when following.
  template <typename Call>
  auto Retrying(Call call) -> decltype(call()) {
    absl::Duration backoff = absl::Milliseconds(500);
    for (int failures = 0;; ++failures) {
      auto result = call();
      if (result.ok() || !options_.follow || !Transient(result.status()) ||
          failures >= options_.max_retries) {
        return result;
      }
      *env_.err << "coordinator not answering (" << result.status().message() << "); retry "
                << failures + 1 << "/" << options_.max_retries << " in "
                << absl::FormatDuration(backoff) << "\n";
      env_.sleep(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(8));
    }
  }

  absl::StatusOr<v1::GetLogsResponse> Fetch(absl::Duration wait) {
    v1::GetLogsRequest request;
    request.set_job_id(job_id_);
    if (options_.rank.has_value()) request.set_rank(*options_.rank);
    request.set_generation(generation_);
    for (const auto& [rank, offset] : cursors_) {
      v1::LogCursor* cursor = request.add_after();
      cursor->set_rank(rank);
      cursor->set_offset(offset);
    }
    request.set_wait_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(wait)));
    return Retrying([&] { return client_.GetLogs(request); });
  }

  // Prints (or, for --tail, collects) the chunks and moves the cursors past them.
  void Show(const v1::GetLogsResponse& answer) {
    // --output json: each answer with output is one line of JSON (the bytes base64, as
    // protobuf's mapping has it); --tail prints one such line at the end instead.
    if (env_.json && !collecting_ && answer.chunks_size() > 0) {
      PrintJson(answer, env_, /*one_line=*/true);
      env_.out->flush();
    }
    for (const v1::LogChunk& chunk : answer.chunks()) {
      // A rank read for the first time started at the oldest byte kept: the bytes before it
      // are not kept either.
      const bool first = cursors_.count(chunk.rank()) == 0;
      const uint64_t not_kept = chunk.skipped() + (first ? chunk.offset() : 0);
      cursors_[chunk.rank()] = chunk.offset() + chunk.data().size();
      if (collecting_) {
        tails_[chunk.rank()] += chunk.data();
        continue;
      }
      if (env_.json) continue;
      if (not_kept > 0) {
        printer_.Line(absl::StrCat("[rank ", chunk.rank(), ": ", not_kept, " bytes not kept]"));
      }
      printer_.Print(chunk.rank(), chunk.data());
    }
  }

  // --tail under --output json: the last lines of every rank as one GetLogsResponse.
  void PrintTailsJson(uint64_t generation) {
    v1::GetLogsResponse tails;
    tails.set_generation(generation);
    for (const auto& [rank, text] : tails_) {
      const absl::string_view kept = LastLines(text, options_.tail);
      v1::LogChunk* chunk = tails.add_chunks();
      chunk->set_rank(rank);
      chunk->set_offset(cursors_[rank] - kept.size());
      chunk->set_data(std::string(kept));
    }
    PrintJson(tails, env_, /*one_line=*/true);
  }

  // The job's first generation after `after` (0 when the job ended without one), waiting for
  // it with WatchJob long polls.
  absl::StatusOr<uint64_t> NextGeneration(uint64_t after) {
    uint64_t version = 0;
    while (true) {
      absl::StatusOr<v1::WatchJobResponse> watched =
          Retrying([&] { return client_.Watch(job_id_, version, options_.poll_wait); });
      if (!watched.ok()) return watched.status();
      const v1::JobStatus& job = watched->job();
      if (job.generation() > after) return job.generation();
      if (IsTerminal(job.state())) return uint64_t{0};
      version = job.version();
    }
  }

  const std::string& job_id_;
  const LogsOptions& options_;
  JobClient& client_;
  const CommandEnvironment& env_;
  LogPrinter printer_;
  uint64_t generation_;
  std::map<uint32_t, uint64_t> cursors_;  // per rank, the next byte wanted
  bool collecting_ = false;               // reading what is kept, for --tail
  std::map<uint32_t, std::string> tails_;
};

}  // namespace

int RunLogs(const std::string& job_id, const LogsOptions& options, JobClient& client,
            const CommandEnvironment& env) {
  return LogsReader(job_id, options, client, env).Run();
}

}  // namespace ringleader
