// Recovery trial tool (not part of the test run):
//
//   bazel run -c opt //tests/e2e:recovery_trial -- --trials=100 --seed=1
//
// Starts a real cluster (coordinator + 2 worker daemons) and runs N short jobs with periodic
// checkpoints and restarts. In each, at a random step, it injects one fault: SIGKILL of a
// random rank process, SIGKILL of a random worker daemon (started again at once, as systemd
// would), or SIGSTOP of a random rank process. It prints per trial and in total: jobs recovered
// (SUCCEEDED after a restart) / N, steps lost (from the job's attempt summaries: the failed
// attempt's last reported step minus the step the next one resumed after, whether from a
// snapshot in memory or a checkpoint; with snapshots usually 0 to a few steps, without them
// bounded by the checkpoint interval), detection latency (fault -> the coordinator ended the
// attempt) and restart latency (fault -> every rank of the new generation reported a step), as
// median and max. The jobs take snapshots in memory (the daemons' default --snapshot_dir,
// automatic interval); --snapshots=off runs them with disable_snapshots, --snapshots=both runs
// every trial's fault (kind, rank, step) twice, with and without, and prints both summaries.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/e2e/cluster.h"

ABSL_FLAG(int, trials, 100, "number of trials (one job each)");
ABSL_FLAG(uint32_t, seed, 1, "seed of the fault schedule");
ABSL_FLAG(uint32_t, checkpoint_interval, 8, "checkpoint_interval_steps of the jobs");
ABSL_FLAG(std::string, snapshots, "on",
          "on: the jobs take snapshots in memory (the default interval); off: disable_snapshots; "
          "both: each trial's fault with and then without them");
ABSL_FLAG(bool, events, false, "print each job's attempts and events after its trial line");

namespace ringleader {
namespace e2e {
namespace {

constexpr uint32_t kSlowMs = 15;  // per step on rank 0: a 96-step job takes ~1.5 s

struct Fault {
  int kind = 0;  // 0 kill rank, 1 kill daemon, 2 stop rank
  uint32_t victim_rank = 0;
  uint64_t at_step = 0;
};

struct Trial {
  std::string fault;
  bool recovered = false;
  int64_t steps_lost = 0;
  // The next attempt resumed from a step newer than the last one the coordinator heard of
  // (a snapshot of a step whose report was still queued when the rank died): no step lost.
  bool resumed_past_report = false;
  std::string resumed_from;  // "snapshot", "checkpoint" or "start" (the next attempt's)
  std::string events;  // --events: the job's attempts and events
  int restarts = 0;     // attempts after the first: more than 1 = a restart failed again
  absl::Duration detection, restart;
  std::string detail;
};

v1::JobSpec TrialSpec(int trial, uint32_t interval, bool snapshots) {
  v1::JobSpec spec = SmallSyntheticSpec(absl::StrCat("trial-", trial));
  spec.set_epochs(6);  // 96 steps
  spec.set_checkpoint_dir(absl::StrCat(getenv("TEST_TMPDIR"), "/trial-checkpoints"));
  spec.set_checkpoint_interval_steps(interval);
  spec.set_max_restarts(3);
  spec.set_collective_timeout_ms(2000);  // a stopped peer is noticed within 2 s
  spec.mutable_model()->mutable_faults()->set_slow_rank(0);
  spec.mutable_model()->mutable_faults()->set_slow_ms(kSlowMs);
  spec.set_disable_snapshots(!snapshots);
  return spec;
}

// Polls the job until `done` holds; false at the deadline.
bool Poll(Cluster& cluster, const std::string& id, absl::Duration timeout,
          const std::function<bool(const v1::JobStatus&)>& done, v1::JobStatus* seen) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<v1::JobStatus> status = cluster.GetJob(id);
    if (status.ok()) {
      *seen = *status;
      if (done(*status)) return true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

Fault DrawFault(std::mt19937& random) {
  Fault fault;
  fault.kind = static_cast<int>(random() % 3);
  fault.victim_rank = random() % 2;
  fault.at_step = 10 + random() % 60;
  return fault;
}

Trial RunTrial(Cluster& cluster, int index, const Fault& drawn, uint32_t interval,
               bool snapshots) {
  Trial trial;
  const int kind = drawn.kind;
  const uint32_t victim_rank = drawn.victim_rank;
  const uint64_t at_step = drawn.at_step;
  trial.fault = kind == 0 ? "kill rank" : kind == 1 ? "kill daemon" : "stop rank";

  absl::StatusOr<std::string> id = cluster.Submit(TrialSpec(index, interval, snapshots));
  if (!id.ok()) {
    trial.detail = id.status().ToString();
    return trial;
  }
  v1::JobStatus status;
  if (!Poll(cluster, *id, absl::Seconds(60),
            [&](const v1::JobStatus& s) {
              return s.state() == v1::JOB_STATE_RUNNING && s.ranks_size() == 2 &&
                     s.ranks(0).last_step().step() >= at_step;
            },
            &status)) {
    trial.detail = absl::StrCat("never reached step ", at_step, ": ", LastReason(status));
    return trial;
  }
  const int worker = cluster.WorkerIndex(status.ranks(victim_rank).worker_name());
  const std::vector<ProcessRef> children = cluster.WorkerChildren(worker);
  const absl::Time fault = absl::Now();
  if (kind == 1) {
    cluster.SignalWorker(worker, SIGKILL).IgnoreError();
    if (!children.empty()) kill(children[0].pid, SIGKILL);
    cluster.RestartWorker(worker).IgnoreError();
  } else if (!children.empty()) {
    kill(children[0].pid, kind == 0 ? SIGKILL : SIGSTOP);
  }

  // Detection: the coordinator ended generation 1.
  Poll(cluster, *id, absl::Seconds(60),
       [](const v1::JobStatus& s) { return s.restarts() >= 1 || s.state() != v1::JOB_STATE_RUNNING; },
       &status);
  trial.detection = absl::Now() - fault;
  // Restart: every rank of a later generation reported a step after the one it resumed.
  const bool restarted = Poll(
      cluster, *id, absl::Seconds(90),
      [](const v1::JobStatus& s) {
        if (s.generation() < 2 || s.state() != v1::JOB_STATE_RUNNING) {
          return s.state() == v1::JOB_STATE_SUCCEEDED || s.state() == v1::JOB_STATE_FAILED;
        }
        for (const v1::RankStatus& r : s.ranks()) {
          if (!r.has_last_step()) return false;
        }
        return true;
      },
      &status);
  trial.restart = absl::Now() - fault;
  const JobHistory end = cluster.WaitForEnd(*id, absl::Seconds(120));
  trial.recovered = restarted && end.final.state() == v1::JOB_STATE_SUCCEEDED &&
                    end.final.generation() >= 2;
  // The attempt summaries: resumed_from_step is the step the ranks resumed after, from a
  // snapshot or a checkpoint alike (their first step report says which). The attempt that
  // trains next is the first after the faulted one that reported a step: an attempt that
  // failed while setting up (a further restart) resumed nothing.
  int next = -1;
  for (int a = 1; a < end.final.attempts_size(); ++a) {
    if (end.final.attempts(a).last_step() > 0) {
      next = a;
      break;
    }
  }
  trial.restarts = std::max(0, end.final.attempts_size() - 1);
  if (next > 0) {
    const int64_t last = static_cast<int64_t>(end.final.attempts(0).last_step());
    const int64_t resumed = static_cast<int64_t>(end.final.attempts(next).resumed_from_step());
    trial.resumed_past_report = resumed > last;
    trial.steps_lost = std::max<int64_t>(0, last - resumed);
    trial.resumed_from = resumed == 0 ? "start" : "checkpoint";
    const std::string resumed_event =
        absl::StrCat("generation ", end.final.attempts(next).generation(), " resumed from ");
    for (const v1::JobEvent& event : end.final.events()) {
      if (absl::StartsWith(event.message(), resumed_event) &&
          (absl::StrContains(event.message(), ".snap") ||
           absl::StrContains(event.message(), "snapshot"))) {
        trial.resumed_from = "snapshot";
      }
    }
  }
  trial.detail = absl::StrCat(v1::JobState_Name(end.final.state()), " generation ",
                              end.final.generation(), ": ", LastReason(end.final));
  if (absl::GetFlag(FLAGS_events)) {
    for (const v1::AttemptSummary& a : end.final.attempts()) {
      absl::StrAppend(&trial.events, "\n    attempt ", a.generation(), ": resumed after step ",
                      a.resumed_from_step(), ", last step ", a.last_step(), ", ",
                      a.end_reason());
    }
    for (const v1::JobEvent& event : end.final.events()) {
      absl::StrAppend(&trial.events, "\n    event: ", event.message());
    }
  }
  if (kind == 2 && !children.empty()) kill(children[0].pid, SIGKILL);  // whatever is left
  cluster.WaitForIdleWorkers(2, absl::Seconds(60)).IgnoreError();
  return trial;
}

std::string Figures(std::vector<double> values, const std::string& unit) {
  if (values.empty()) return "-";
  std::sort(values.begin(), values.end());
  return absl::StrFormat("median %.2f %s, max %.2f %s", values[values.size() / 2], unit,
                         values.back(), unit);
}

// One configuration's trials: the figures as they come in, then the summary.
struct Series {
  std::string name;
  bool snapshots = true;
  int recovered = 0, resumed_past_report = 0, restarted_again = 0;
  std::map<std::string, int> resumed_from;
  std::vector<double> lost, detection, restart;

  void Add(const Trial& trial) {
    recovered += trial.recovered ? 1 : 0;
    resumed_past_report += trial.resumed_past_report ? 1 : 0;
    restarted_again += trial.restarts > 1 ? 1 : 0;
    if (!trial.resumed_from.empty()) ++resumed_from[trial.resumed_from];
    lost.push_back(static_cast<double>(trial.steps_lost));
    detection.push_back(absl::ToDoubleSeconds(trial.detection));
    restart.push_back(absl::ToDoubleSeconds(trial.restart));
  }

  void Print(int trials, uint32_t interval) const {
    std::string sources;
    for (const auto& [from, count] : resumed_from) {
      absl::StrAppend(&sources, sources.empty() ? "" : ", ", count, " from ", from);
    }
    std::cout << "\n" << name << ":\n"
              << "recovered " << recovered << " / " << trials << " (" << restarted_again
              << " of them after more than one restart)\n"
              << "resumed: " << (sources.empty() ? "-" : sources) << "\n"
              << "steps lost: " << Figures(lost, "steps") << " (checkpoint interval " << interval
              << (snapshots ? ", snapshots in memory at the automatic interval" : ", no snapshots")
              << ")";
    if (resumed_past_report > 0) {
      std::cout << "; " << resumed_past_report
                << " resumed past the last step the coordinator heard of (counted as 0)";
    }
    std::cout << "\n"
              << "detection latency: " << Figures(detection, "s") << "\n"
              << "restart latency (fault -> every rank training again): " << Figures(restart, "s")
              << std::endl;
  }
};

int Main() {
  const int trials = absl::GetFlag(FLAGS_trials);
  const uint32_t interval = absl::GetFlag(FLAGS_checkpoint_interval);
  const std::string mode = absl::GetFlag(FLAGS_snapshots);
  std::vector<Series> series;
  if (mode == "on" || mode == "both") series.push_back({"with snapshots in memory", true});
  if (mode == "off" || mode == "both") {
    series.push_back({"without snapshots (disable_snapshots)", false});
  }
  if (series.empty()) {
    std::cerr << "--snapshots must be on, off or both, not " << mode << std::endl;
    return 2;
  }
  std::mt19937 random(absl::GetFlag(FLAGS_seed));
  ClusterOptions options;
  options.heartbeat_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "cannot start the cluster: " << cluster.status() << "\n";
    return 1;
  }
  int job = 0;
  for (int i = 0; i < trials; ++i) {
    const Fault fault = DrawFault(random);
    for (Series& one : series) {
      const Trial trial = RunTrial(**cluster, job++, fault, interval, one.snapshots);
      one.Add(trial);
      std::cout << absl::StrFormat(
                       "trial %3d %-9s %-11s %s  steps lost %3d  detection %6.2f s  restart "
                       "%6.2f s  resumed from %-10s restarts %d %s",
                       i + 1, one.snapshots ? "snapshots" : "no snaps", trial.fault,
                       trial.recovered ? "recovered" : "NOT RECOVERED", trial.steps_lost,
                       absl::ToDoubleSeconds(trial.detection),
                       absl::ToDoubleSeconds(trial.restart),
                       trial.resumed_from.empty() ? "-" : trial.resumed_from, trial.restarts,
                       trial.recovered ? "" : trial.detail)
                << trial.events << std::endl;
    }
  }
  bool all = true;
  for (const Series& one : series) {
    one.Print(trials, interval);
    all = all && one.recovered == trials;
  }
  return all ? 0 : 1;
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Under `bazel run` the binaries are in this program's runfiles (the working directory).
  if (getenv("TEST_SRCDIR") == nullptr) setenv("TEST_SRCDIR", "..", 1);
  // A directory of its own: job ids start again at job-000001 in every run (the coordinator
  // runs without --state_dir), and an earlier run's checkpoints must not be in the way.
  if (getenv("TEST_TMPDIR") == nullptr) {
    char dir[] = "/tmp/ringleader-recovery-trial-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::cerr << "recovery_trial: cannot create a directory under /tmp" << std::endl;
      return 1;
    }
    setenv("TEST_TMPDIR", dir, 1);
  }
  return ringleader::e2e::Main();
}
