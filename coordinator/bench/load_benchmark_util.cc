#include "coordinator/bench/load_benchmark_util.h"

#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ringleader {
namespace bench {

CoordinatorOptions LoadOptions(uint32_t world_size) {
  CoordinatorOptions options;
  options.max_wait = absl::Seconds(600);
  options.rendezvous_timeout = absl::Seconds(600);
  options.heartbeat_timeout = absl::Seconds(600);
  options.limits.max_world_size = world_size;
  options.max_reports_per_second_per_rank = 0;
  return options;
}

std::vector<uint32_t> WorldSizesOrExit(const std::vector<std::string>& texts) {
  std::vector<uint32_t> sizes;
  for (const std::string& text : texts) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 2) {
      std::fprintf(stderr, "--ranks: \"%s\" is not a world size >= 2\n", text.c_str());
      std::exit(2);
    }
    sizes.push_back(n);
  }
  return sizes;
}

void Fail(const absl::Status& status, const std::string& what) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(1);
}

std::string KvPrefix(absl::string_view job_id, uint64_t generation) {
  return absl::StrCat(job_id, "/", generation, "/gloo/");
}

std::string Hostname(uint32_t rank) { return absl::StrCat("host-", rank / kRanksPerHost); }

char BlobByte(uint32_t rank) { return static_cast<char>('a' + rank % 26); }

std::string Blob(uint32_t world_size, uint32_t rank, size_t address_bytes) {
  return std::string(static_cast<size_t>(world_size - 1) * address_bytes, BlobByte(rank));
}

std::vector<std::string> HostnameKeys(const std::string& prefix, uint32_t rank) {
  std::vector<std::string> keys;
  keys.reserve(rank);
  for (uint32_t i = 0; i < rank; ++i) keys.push_back(absl::StrCat(prefix, "rank_", i));
  return keys;
}

PeerKeys AddressKeys(const std::string& prefix, uint32_t world_size, uint32_t rank) {
  PeerKeys peers;
  peers.parts.count = world_size - 1;
  peers.keys.reserve(world_size - 1);
  peers.parts.index.reserve(world_size - 1);
  for (uint32_t i = 0; i < world_size; ++i) {
    if (i == rank) continue;
    peers.keys.push_back(absl::StrCat(prefix, i));
    peers.parts.index.push_back(rank > i ? rank - 1 : rank);
  }
  return peers;
}

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

Rate Sustained(int threads, absl::Duration run, const std::function<uint64_t(int)>& body) {
  std::atomic<uint64_t> units{0};
  absl::Mutex mu;
  double calling_cpu = 0;
  const double cpu_start = CpuSeconds();
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double mine_start = ThreadCpuSeconds();
      uint64_t mine = 0;
      while (absl::Now() - start < run) mine += body(t);
      units += mine;
      const double used = ThreadCpuSeconds() - mine_start;
      absl::MutexLock lock(&mu);
      calling_cpu += used;
    });
  }
  for (std::thread& thread : pool) thread.join();
  const absl::Duration took = absl::Now() - start;
  Rate rate;
  rate.cpu = CpuSeconds() - cpu_start;
  rate.calling_cpu = calling_cpu;
  rate.units = units;
  rate.per_second = static_cast<double>(rate.units) / absl::ToDoubleSeconds(took);
  return rate;
}

uint64_t ForShare(int t, int threads, size_t count, const std::function<void(size_t)>& fn) {
  uint64_t done = 0;
  for (size_t i = static_cast<size_t>(t); i < count; i += static_cast<size_t>(threads)) {
    fn(i);
    ++done;
  }
  return done;
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

std::string CpuPerCall(const Rate& rate, double calls) {
  if (calls <= 0) return "no calls";
  return absl::StrFormat("%.1f CPU us per call, %.1f of it in the calling threads",
                         rate.cpu * 1e6 / calls, rate.calling_cpu * 1e6 / calls);
}

}  // namespace bench
}  // namespace ringleader
