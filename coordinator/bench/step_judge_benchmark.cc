// The step judge's throughput and memory: `ranks` x `steps` reports (drift every 50 steps, a
// straggler window every 20) through one StepJudge on one thread, as the coordinator feeds them.
// Baseline in the same run: the same reports only copied into a vector (the cost of touching
// them), so the judge's own cost is the difference. Prints rank-steps/s, ns per rank-step and
// the memory the judge holds at the end (nothing should grow with the steps).
//
//   bazel run -c opt //coordinator/bench:step_judge_benchmark -- --ranks=64 --steps=10000
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/core/step_judge.h"
#include "proto/ringleader.pb.h"

ABSL_FLAG(int, ranks, 64, "Ranks of the simulated job.");
ABSL_FLAG(int, steps, 10000, "Steps of the simulated job.");
ABSL_FLAG(int, reports_per_call, 8, "Steps a rank batches into one ReportProgress.");

namespace ringleader {
namespace {

// One rank's clean report of `step` (the judge's work does not depend on the values).
v1::StepReport Report(uint64_t step, uint32_t rank) {
  v1::StepReport r;
  r.set_step(step);
  r.set_loss(1.0 / step);
  r.set_local_grad_norm(1.0 + 0.001 * rank);
  r.set_synced_grad_norm(2.0);
  r.set_collective_digest(0x1234);
  r.set_collectives(4);
  r.set_step_ms(10);
  r.set_compute_ms(6);
  r.set_comm_ms(4);
  if (step % 50 == 0) {
    r.set_has_drift(true);
    r.set_drift(0);
    r.set_drift_parameter("fc1.weight");
  }
  return r;
}

int Main() {
  const uint32_t ranks = static_cast<uint32_t>(absl::GetFlag(FLAGS_ranks));
  const uint64_t steps = static_cast<uint64_t>(absl::GetFlag(FLAGS_steps));
  const uint64_t batch = static_cast<uint64_t>(absl::GetFlag(FLAGS_reports_per_call));
  if (ranks < 1 || steps < 1 || batch < 1) {
    std::fprintf(stderr, "--ranks, --steps and --reports_per_call must be >= 1\n");
    return 2;
  }
  // The reports, built before timing: rank by rank in batches, as ranks send them.
  std::vector<std::pair<uint32_t, v1::StepReport>> feed;
  feed.reserve(ranks * steps);
  for (uint64_t first = 1; first <= steps; first += batch) {
    for (uint32_t r = 0; r < ranks; ++r) {
      for (uint64_t s = first; s < first + batch && s <= steps; ++s) {
        feed.emplace_back(r, Report(s, r));
      }
    }
  }

  // Baseline: touch every report once (copy it).
  std::vector<v1::StepReport> sink;
  sink.reserve(feed.size());
  absl::Time start = absl::Now();
  for (const auto& [rank, report] : feed) sink.push_back(report);
  const absl::Duration baseline = absl::Now() - start;

  StepJudgeOptions options;
  options.samples_per_step = 64.0 * ranks;
  StepJudge judge(ranks, options);
  std::vector<v1::Alarm> raised;
  start = absl::Now();
  for (const auto& [rank, report] : feed) judge.Add(rank, report, &raised);
  const absl::Duration judged = absl::Now() - start;

  const double n = static_cast<double>(feed.size());
  std::printf("step judge: %u ranks x %llu steps = %.0f rank-steps, %llu steps per call\n", ranks,
              static_cast<unsigned long long>(steps), n,
              static_cast<unsigned long long>(batch));
  std::printf("  judge:    %8.3f s  %12.0f rank-steps/s  %7.1f ns per rank-step\n",
              absl::ToDoubleSeconds(judged), n / absl::ToDoubleSeconds(judged),
              absl::ToDoubleNanoseconds(judged) / n);
  std::printf("  baseline: %8.3f s  (copying each report once)  judge/baseline %.2fx\n",
              absl::ToDoubleSeconds(baseline),
              absl::ToDoubleSeconds(judged) / absl::ToDoubleSeconds(baseline));
  std::printf("  steps judged %llu, pending %zu, alarms %zu (expected 0 on clean reports)\n",
              static_cast<unsigned long long>(judge.verdict().steps_judged()),
              judge.pending_steps(), judge.alarms().size());
  std::printf("  memory held by the judge at the end: %zu bytes (%.1f per rank)\n",
              judge.MemoryBytes(), static_cast<double>(judge.MemoryBytes()) / ranks);
  const bool ok = judge.verdict().steps_judged() == steps && judge.alarms().empty();
  if (!ok) std::fprintf(stderr, "FAILED: not every step judged, or alarms on clean reports\n");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringleader::Main();
}
