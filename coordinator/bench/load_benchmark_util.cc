#include "coordinator/bench/load_benchmark_util.h"

#include <sys/resource.h>
#include <time.h>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace bench {

v1::StepReport StepOf(uint64_t step, uint32_t rank) {
  v1::StepReport report;
  report.set_step(step);
  report.set_epoch(1);
  report.set_loss(2.3 / static_cast<double>(step) + 0.001 * rank);
  report.set_local_grad_norm(1.0 + 0.001 * rank);
  report.set_synced_grad_norm(1.25);
  report.set_collectives(4);
  report.set_collective_digest(0x9e3779b97f4a7c15ULL ^ step);
  report.set_step_ms(12.5);
  report.set_compute_ms(8.0);
  report.set_comm_ms(4.0);
  return report;
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

std::string Thousands(double value) {
  std::string digits = absl::StrCat(static_cast<uint64_t>(value + 0.5));
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(at, " ");
  return digits;
}

}  // namespace bench
}  // namespace ringleader
