// Recovery trial tool (not part of the test run):
//
//   bazel run -c opt //tests/e2e:recovery_trial -- --trials=100 --seed=1
//
// Starts a real cluster (coordinator + 2 worker daemons) and runs N short jobs with periodic
// checkpoints and restarts. In each, at a random step, it injects one fault: SIGKILL of a
// random rank process, SIGKILL of a random worker daemon (started again at once, as systemd
// would), or SIGSTOP of a random rank process. It prints per trial and in total: jobs recovered
// (SUCCEEDED after a restart) / N, steps lost (the failed attempt's last step minus the step
// the next one resumed after; bounded by the checkpoint interval), detection latency (fault ->
// the coordinator ended the attempt) and restart latency (fault -> every rank of the new
// generation reported a step), as median and max.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/e2e/cluster.h"

ABSL_FLAG(int, trials, 100, "number of trials (one job each)");
ABSL_FLAG(uint32_t, seed, 1, "seed of the fault schedule");
ABSL_FLAG(uint32_t, checkpoint_interval, 8, "checkpoint_interval_steps of the jobs");

namespace ringleader {
namespace e2e {
namespace {

constexpr uint32_t kSlowMs = 15;  // per step on rank 0: a 96-step job takes ~1.5 s

struct Trial {
  std::string fault;
  bool recovered = false;
  uint64_t steps_lost = 0;
  absl::Duration detection, restart;
  std::string detail;
};

v1::JobSpec TrialSpec(int trial, uint32_t interval) {
  v1::JobSpec spec = SmallSyntheticSpec(absl::StrCat("trial-", trial));
  spec.set_epochs(6);  // 96 steps
  spec.set_checkpoint_dir(absl::StrCat(getenv("TEST_TMPDIR"), "/trial-checkpoints"));
  spec.set_checkpoint_interval_steps(interval);
  spec.set_max_restarts(3);
  spec.set_collective_timeout_ms(2000);  // a stopped peer is noticed within 2 s
  spec.mutable_model()->mutable_faults()->set_slow_rank(0);
  spec.mutable_model()->mutable_faults()->set_slow_ms(kSlowMs);
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

Trial RunTrial(Cluster& cluster, int index, std::mt19937& random, uint32_t interval) {
  Trial trial;
  const int kind = static_cast<int>(random() % 3);
  const uint32_t victim_rank = random() % 2;
  const uint64_t at_step = 10 + random() % 60;
  trial.fault = kind == 0 ? "kill rank" : kind == 1 ? "kill daemon" : "stop rank";

  absl::StatusOr<std::string> id = cluster.Submit(TrialSpec(index, interval));
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
  if (end.final.attempts_size() >= 2) {
    trial.steps_lost =
        end.final.attempts(0).last_step() - end.final.attempts(1).resumed_from_step();
  }
  trial.detail = absl::StrCat(v1::JobState_Name(end.final.state()), " generation ",
                              end.final.generation(), ": ", LastReason(end.final));
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

int Main() {
  const int trials = absl::GetFlag(FLAGS_trials);
  const uint32_t interval = absl::GetFlag(FLAGS_checkpoint_interval);
  std::mt19937 random(absl::GetFlag(FLAGS_seed));
  ClusterOptions options;
  options.heartbeat_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "cannot start the cluster: " << cluster.status() << "\n";
    return 1;
  }
  int recovered = 0;
  std::vector<double> lost, detection, restart;
  for (int i = 0; i < trials; ++i) {
    const Trial trial = RunTrial(**cluster, i, random, interval);
    recovered += trial.recovered ? 1 : 0;
    lost.push_back(static_cast<double>(trial.steps_lost));
    detection.push_back(absl::ToDoubleSeconds(trial.detection));
    restart.push_back(absl::ToDoubleSeconds(trial.restart));
    std::cout << absl::StrFormat(
                     "trial %3d %-11s %s  steps lost %3d  detection %6.2f s  restart %6.2f s  %s",
                     i + 1, trial.fault, trial.recovered ? "recovered" : "NOT RECOVERED",
                     trial.steps_lost, absl::ToDoubleSeconds(trial.detection),
                     absl::ToDoubleSeconds(trial.restart), trial.recovered ? "" : trial.detail)
              << std::endl;
  }
  std::cout << "\nrecovered " << recovered << " / " << trials << "\n"
            << "steps lost: " << Figures(lost, "steps") << " (checkpoint interval " << interval
            << ")\n"
            << "detection latency: " << Figures(detection, "s") << "\n"
            << "restart latency (fault -> every rank training again): " << Figures(restart, "s")
            << std::endl;
  return recovered == trials ? 0 : 1;
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
