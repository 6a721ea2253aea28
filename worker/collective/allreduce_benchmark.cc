// Measures the CPU backends' all-reduce with ranks as threads — gloo over loopback TCP and the
// shared-memory collective — one flat all-reduce of the whole buffer vs the same buffer as K
// bucket views all-reduced asynchronously (gloo: in flight together on K communication threads;
// shm: queued on its one thread), for world sizes 2 and 4. Prints time, bus bandwidth
// (bytes / time x 2(n-1)/n), the bucketed/flat ratio and, with both backends, shm/gloo.
//
//   allreduce_benchmark --mib=100 --buckets=4 --iters=3 --backends=gloo,shm
#include <algorithm>
#include <map>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/shm/shm_collective.h"

ABSL_FLAG(int, mib, 100, "Buffer size per rank in MiB (float32).");
ABSL_FLAG(int, buckets, 4, "Number of equal bucket views for the bucketed run.");
ABSL_FLAG(int, iters, 3, "Timed iterations per variant (after one warm-up).");
ABSL_FLAG(std::string, world_sizes, "2,4", "Comma-separated world sizes to measure.");
ABSL_FLAG(std::string, backends, "gloo,shm", "Comma-separated backends: gloo, shm.");

namespace ringleader {
namespace {

struct Result {
  absl::Duration flat;
  absl::Duration bucketed;
};

// Median of the timed iterations, as seen by rank 0 (after a barrier aligns the ranks).
absl::Duration Median(std::vector<absl::Duration> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::StatusOr<std::unique_ptr<Collective>> CreateRank(const std::string& backend,
                                                       std::shared_ptr<KeyValueStore> store,
                                                       int rank, int n, int buckets) {
  const std::string prefix = absl::StrCat("bench/", n, "/", backend, "/");
  if (backend == "shm") {
    ShmOptions opts;
    opts.collective_timeout = absl::Seconds(300);
    absl::StatusOr<ShmRendezvous> r = CreateShmCollective(store, prefix, rank, n, opts);
    if (!r.ok()) return r.status();
    if (r->collective == nullptr) return absl::UnavailableError(r->unavailable);
    return std::move(r->collective);
  }
  GlooOptions opts;
  opts.comm_threads = buckets;
  opts.collective_timeout = absl::Seconds(300);
  return CreateGlooCollective(store, prefix, rank, n, opts);
}

int Run(const std::string& backend, int n, size_t count, int buckets, int iters,
        Result* result) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::unique_ptr<Collective>> ranks(n);
  std::vector<absl::Status> errors(n);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto c = CreateRank(backend, store, r, n, buckets);
        if (c.ok()) {
          ranks[r] = std::move(*c);
        } else {
          errors[r] = c.status();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < n; ++r) {
    if (!errors[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, errors[r].ToString().c_str());
      return 1;
    }
  }

  std::vector<absl::Duration> flat, bucketed;
  absl::Mutex mu;
  absl::Status first_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Collective& c = *ranks[r];
      std::vector<float> buf(count, 1.0f / (r + 1));
      auto check = [&](const absl::Status& s) {
        if (s.ok()) return true;
        absl::MutexLock lock(&mu);
        if (first_error.ok()) first_error = s;
        return false;
      };
      for (int it = 0; it <= iters; ++it) {
        // Flat.
        if (!check(c.Barrier()->Wait())) return;
        absl::Time start = Clock::Real()->Now();
        if (!check(c.AllReduce({buf.data(), count, DataType::kFloat32}, ReduceOp::kSum)->Wait())) {
          return;
        }
        const absl::Duration flat_time = Clock::Real()->Now() - start;
        // Bucketed: K views of the same buffer, all issued, then all waited.
        if (!check(c.Barrier()->Wait())) return;
        start = Clock::Real()->Now();
        std::vector<std::shared_ptr<Work>> works;
        const size_t per = count / buckets;
        for (int b = 0; b < buckets; ++b) {
          const size_t begin = b * per;
          const size_t len = b == buckets - 1 ? count - begin : per;
          CollectiveOptions o;
          o.bucket = b;
          works.push_back(c.AllReduce({buf.data() + begin, len, DataType::kFloat32},
                                      ReduceOp::kSum, o));
        }
        for (auto& w : works) {
          if (!check(w->Wait())) return;
        }
        const absl::Duration bucket_time = Clock::Real()->Now() - start;
        if (r == 0 && it > 0) {  // iteration 0 warms up
          absl::MutexLock lock(&mu);
          flat.push_back(flat_time);
          bucketed.push_back(bucket_time);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!first_error.ok()) {
    std::fprintf(stderr, "n=%d: %s\n", n, first_error.ToString().c_str());
    return 1;
  }
  result->flat = Median(flat);
  result->bucketed = Median(bucketed);
  return 0;
}

double BusBandwidthGBps(size_t bytes, absl::Duration t, int n) {
  return static_cast<double>(bytes) / absl::ToDoubleSeconds(t) * 2.0 * (n - 1) / n / 1e9;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "CPU all-reduce (gloo over loopback, shared memory): flat vs bucketed-async. Usage: "
      "allreduce_benchmark [--mib=100] [--buckets=4] [--iters=3] [--world_sizes=2,4] "
      "[--backends=gloo,shm]");
  absl::ParseCommandLine(argc, argv);
  const int mib = absl::GetFlag(FLAGS_mib);
  const int buckets = absl::GetFlag(FLAGS_buckets);
  const int iters = absl::GetFlag(FLAGS_iters);
  if (mib < 1 || buckets < 1 || iters < 1) {
    std::fprintf(stderr, "--mib, --buckets and --iters must be >= 1\n");
    return 2;
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const size_t count = bytes / sizeof(float);
  std::printf("float32 sum all-reduce of %d MiB per rank; %d timed iterations (median), "
              "bucketed = %d x %.1f MiB views in flight on %d threads\n",
              mib, iters, buckets, static_cast<double>(mib) / buckets, buckets);
  const std::vector<std::string> backends = absl::StrSplit(absl::GetFlag(FLAGS_backends), ',');
  for (const std::string& b : backends) {
    if (b != "gloo" && b != "shm") {
      std::fprintf(stderr, "--backends: unknown backend '%s' (expected gloo or shm)\n", b.c_str());
      return 2;
    }
  }
  std::printf("%-5s %4s %12s %14s %14s %16s %8s\n", "", "n", "flat_ms", "flat_busbw",
              "bucket_ms", "bucket_busbw", "ratio");
  for (absl::string_view ws : absl::StrSplit(absl::GetFlag(FLAGS_world_sizes), ',')) {
    const int n = std::stoi(std::string(ws));
    if (n < 2) {
      std::fprintf(stderr, "--world_sizes entries must be >= 2\n");
      return 2;
    }
    std::map<std::string, ringleader::Result> by_backend;
    for (const std::string& backend : backends) {
      ringleader::Result r;
      if (ringleader::Run(backend, n, count, buckets, iters, &r) != 0) return 1;
      by_backend[backend] = r;
      const double flat_bw = ringleader::BusBandwidthGBps(bytes, r.flat, n);
      const double bucket_bw = ringleader::BusBandwidthGBps(bytes, r.bucketed, n);
      std::printf("%-5s %4d %12.2f %10.2f GB/s %14.2f %12.2f GB/s %7.2fx\n", backend.c_str(), n,
                  absl::ToDoubleMilliseconds(r.flat), flat_bw,
                  absl::ToDoubleMilliseconds(r.bucketed), bucket_bw, bucket_bw / flat_bw);
    }
    if (by_backend.count("gloo") && by_backend.count("shm")) {
      std::printf("      n=%d: shm is %.2fx gloo's flat speed, %.2fx its bucketed speed\n", n,
                  absl::FDivDuration(by_backend["gloo"].flat, by_backend["shm"].flat),
                  absl::FDivDuration(by_backend["gloo"].bucketed, by_backend["shm"].bucketed));
    }
  }
  std::printf("ratio = bucketed busbw / flat busbw (> 1: buckets in flight are faster)\n");
  return 0;
}
