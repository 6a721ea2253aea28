// `ringleader watch`: follows a job through WatchJob long polls until it ends, showing why it
// waits while QUEUED and the coordinator's alarms as they are raised, then prints the
// coordinator's verdict (verdict_format.h). It judges nothing itself.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/verdict_format.h"

namespace ringleader {
namespace {

// Permanent lines plus one live progress line: rewritten in place with '\r' on a terminal,
// printed at most every `interval` (and only when changed) otherwise, so logs stay short.
class ProgressPrinter {
 public:
  ProgressPrinter(const CommandEnvironment& env, absl::Duration interval)
      : env_(env), interval_(interval) {}

  void Line(const std::string& text) {
    EndLive();
    *env_.out << text << "\n" << std::flush;
  }

  void Progress(const std::string& text) {
    if (env_.out_is_tty) {
      *env_.out << "\r" << text;
      if (live_length_ > text.size()) *env_.out << std::string(live_length_ - text.size(), ' ');
      *env_.out << std::flush;
      live_length_ = text.size();
      return;
    }
    const absl::Time now = env_.clock->Now();
    if (text == last_plain_ || (printed_plain_ && now - last_plain_time_ < interval_)) return;
    *env_.out << text << "\n" << std::flush;
    printed_plain_ = true;
    last_plain_ = text;
    last_plain_time_ = now;
  }

  // Ends the live line so the next output starts on a fresh line.
  void EndLive() {
    if (live_length_ == 0) return;
    *env_.out << "\n";
    live_length_ = 0;
  }

 private:
  const CommandEnvironment& env_;
  const absl::Duration interval_;
  size_t live_length_ = 0;
  bool printed_plain_ = false;
  std::string last_plain_;
  absl::Time last_plain_time_;
};

// "step 120/? | epoch 1 | loss 0.4321 | step 12.3 ms | comm 4.1 ms" of the slowest rank, then
// the coordinator's verdict so far ("| 5120 samples/s | PASS"); "" when no rank has stepped yet.
std::string ProgressText(const v1::JobStatus& job) {
  const v1::StepReport* slowest = nullptr;
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!rank.has_last_step()) continue;
    if (slowest == nullptr || rank.last_step().step() < slowest->step()) {
      slowest = &rank.last_step();
    }
  }
  if (slowest == nullptr) return "";
  // The ranks know the total (data set size, epochs, max_steps); older ranks send 0.
  uint64_t total = slowest->total_steps();
  if (total == 0) total = job.spec().max_steps();
  std::string text =
      absl::StrCat("step ", slowest->step(), "/", total > 0 ? absl::StrCat(total) : "?",
                   " | epoch ", slowest->epoch(), " | loss ", FormatNumber(slowest->loss()),
                   " | step ", FormatNumber(slowest->step_ms(), 3), " ms | comm ",
                   FormatNumber(slowest->comm_ms(), 3), " ms");
  const v1::Verdict& verdict = job.verdict();
  if (verdict.samples_per_second() > 0) {
    absl::StrAppend(&text, " | ", absl::StrFormat("%.0f", verdict.samples_per_second()),
                    " samples/s");
  }
  if (verdict.result() != v1::Verdict::RESULT_UNSPECIFIED) {
    absl::StrAppend(&text, " | ", VerdictResultName(verdict.result()));
  }
  return text;
}

}  // namespace

int RunWatch(const std::string& job_id, const WatchOptions& options, JobClient& client,
             const CommandEnvironment& env) {
  // Under --output json stdout carries only the job's messages (one per line); the progress
  // and retry lines go to stderr.
  CommandEnvironment progress_env = env;
  if (env.json) {
    progress_env.out = env.err;
    progress_env.out_is_tty = false;
  }
  ProgressPrinter printer(progress_env, options.plain_interval);
  printer.Line(
      absl::StrCat("watching job ", job_id, " (interrupting the watch leaves the job running)"));
  uint64_t version = 0;
  int transitions_shown = 0;
  int epochs_shown = 0;
  int alarms_shown = 0;
  uint64_t alarms_generation = 0;
  std::string waiting_shown;  // the reason last printed while the job was QUEUED
  int failures = 0;
  absl::Duration backoff = absl::Milliseconds(500);
  while (true) {
    absl::StatusOr<v1::WatchJobResponse> response =
        client.Watch(job_id, version, options.poll_wait);
    if (!response.ok()) {
      const absl::StatusCode code = response.status().code();
      const bool transient =
          code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
      if (transient && failures < options.max_retries) {
        ++failures;
        printer.Line(absl::StrCat("coordinator not answering (", response.status().message(),
                                  "); retry ", failures, "/", options.max_retries, " in ",
                                  absl::FormatDuration(backoff)));
        env.sleep(backoff);
        backoff = std::min(backoff * 2, absl::Seconds(8));
        continue;
      }
      printer.EndLive();
      return ReportError(response.status(), "cannot watch job " + job_id, env);
    }
    failures = 0;
    backoff = absl::Milliseconds(500);
    const v1::JobStatus& job = response->job();
    // A long poll that ran out answers with the unchanged status: nothing to show.
    if (version != 0 && job.version() <= version && !IsTerminal(job.state())) continue;
    version = job.version();
    if (env.json) {
      if (PrintJson(*response, env, /*one_line=*/true) != kExitOk) return kExitFailure;
      env.out->flush();
      if (IsTerminal(job.state())) return RunPassed(job) ? kExitOk : kExitFailure;
      continue;
    }

    // Lists restart when the coordinator starts a new attempt; show them again from the top.
    if (job.transitions_size() < transitions_shown) transitions_shown = 0;
    for (; transitions_shown < job.transitions_size(); ++transitions_shown) {
      const v1::StateTransition& transition = job.transitions(transitions_shown);
      printer.Line(absl::StrCat(FormatUnixMillis(transition.time_unix_ms()), "  ",
                                JobStateName(transition.state()),
                                transition.reason().empty() ? "" : ": " + transition.reason()));
    }
    // Why a QUEUED job waits: once when the coordinator gives a reason, again only when it
    // changes; a job queued again (a restart) shows its reason afresh.
    const std::string waiting = WaitingReason(job);
    if (!waiting.empty() && waiting != waiting_shown) printer.Line("waiting: " + waiting);
    waiting_shown = waiting;
    if (job.epochs_size() < epochs_shown) epochs_shown = 0;
    for (; epochs_shown < job.epochs_size(); ++epochs_shown) {
      const v1::EpochReport& epoch = job.epochs(epochs_shown);
      printer.Line(absl::StrFormat("epoch %d: test accuracy %.4f (test loss %s, train loss %s)",
                                   epoch.epoch(), epoch.test_accuracy(),
                                   FormatNumber(epoch.test_loss()),
                                   FormatNumber(epoch.train_loss())));
    }

    if (IsTerminal(job.state())) {
      printer.EndLive();
      for (const v1::RankStatus& rank : job.ranks()) {
        if (!rank.error().empty()) {
          *env.out << "rank " << rank.rank() << " failed: " << rank.error() << "\n";
        }
      }
      *env.out << FormatFinalVerdict(job) << std::flush;
      return RunPassed(job) ? kExitOk : kExitFailure;
    }
    // Each alarm once, as raised; the final verdict lists them all with their later repeats. A
    // new attempt is judged afresh.
    if (job.generation() != alarms_generation || job.alarms_size() < alarms_shown) {
      alarms_shown = 0;
      alarms_generation = job.generation();
    }
    for (; alarms_shown < job.alarms_size(); ++alarms_shown) {
      printer.Line("alarm: " + FormatAlarm(job.alarms(alarms_shown)));
    }
    const std::string progress = ProgressText(job);
    if (!progress.empty()) printer.Progress(progress);
  }
}

}  // namespace ringleader
