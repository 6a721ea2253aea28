// The coordinator core at scale, in process (no gRPC), on the real clock. For each world size N:
//   (a) N workers RegisterWorker and wait for an assignment, one job of world size N is
//       submitted and assigned (every WaitAssignmentAsync answered), every rank JoinJobs, and
//       the ranks rendezvous as gloo's connectFullMesh does through KvGlooStore key by key:
//       KvSet "rank_<r>", KvGet "rank_<i>" for i < r, KvSet "<r>" (r's N-1 pair addresses),
//       then for every peer i a wait and a get of "<i>" (two KvGets of an (N-1)-address blob);
//   (b) the same with the batched rendezvous: one KvGetMany for the "rank_<i>" keys and one for
//       the peers' blobs, cut to this rank's address (KvGetMany parts);
//   (c) heartbeats/s of the N workers from `--threads` threads, for `--seconds`;
//   (d) ReportProgress rank-steps/s of the N ranks of the running job, batches of 20 steps.
// The ranks' calls run phase by phase (every rank sets, then every rank gets), so every read
// finds its keys: the figures are the coordinator's own cost per call, without waiting.
// Figures only, no assertions; goals of the "Coordinator at scale" item: 1024 ranks
// register+assign+rendezvous < 1 s, heartbeats >= 50 000/s.
//
//   bazel run -c opt //coordinator/bench:load_benchmark -- --ranks=64,256,1024
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/bench/load_benchmark_util.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/job_store.h"
#include "proto/ringleader.pb.h"

ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"64", "256", "1024"}),
          "World sizes to measure, comma-separated.");
ABSL_FLAG(int, threads, 2, "Threads sending heartbeats and step reports in (c) and (d).");
ABSL_FLAG(double, seconds, 1.0, "How long (c) and (d) run.");
ABSL_FLAG(int, address_bytes, 136,
          "Bytes of one gloo pair address (gloo's tcp Address: sockaddr_storage + sequence).");

namespace ringleader {
namespace {

using bench::StepOf;
using bench::Thousands;

constexpr int kStepsPerReport = 20;
constexpr int kRanksPerHost = 8;

absl::Time Now() { return Clock::Real()->Now(); }

// Fails the benchmark loudly: a figure measured on a broken path means nothing.
void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "FAILED: %s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

// One coordinator with N registered workers whose job of world size N is assigned and joined.
struct Cluster {
  InMemoryJobStore store;
  std::unique_ptr<Coordinator> coordinator;
  std::vector<WorkerId> workers;
  std::vector<v1::Assignment> assignments;  // by rank
  std::vector<WorkerId> rank_workers;       // by rank
  AttemptId attempt;
  absl::Duration setup;  // register + assign + join
};

std::unique_ptr<Cluster> StartJob(uint32_t n) {
  auto cluster = std::make_unique<Cluster>();
  CoordinatorOptions options;
  options.max_wait = absl::Seconds(600);
  options.rendezvous_timeout = absl::Seconds(600);
  options.heartbeat_timeout = absl::Seconds(600);
  options.limits.max_world_size = n;
  // The ranks report as fast as the coordinator answers: its throughput is measured, not the
  // per-rank limit real ranks stay far below.
  options.max_reports_per_second_per_rank = 0;
  cluster->coordinator = std::make_unique<Coordinator>(options, Clock::Real(), &cluster->store);
  Coordinator& coordinator = *cluster->coordinator;
  cluster->assignments.resize(n);
  cluster->rank_workers.resize(n);
  std::atomic<uint32_t> assigned{0};

  const absl::Time start = Now();
  v1::Device device;
  device.set_kind("cpu");
  for (uint32_t w = 0; w < n; ++w) {
    absl::StatusOr<Coordinator::Registration> registration = coordinator.RegisterWorker(
        absl::StrCat("worker-", w), absl::StrCat("host-", w / kRanksPerHost), {device}, 1);
    Check(registration.status(), "RegisterWorker");
    cluster->workers.push_back(registration->id);
  }
  for (const WorkerId& worker : cluster->workers) {
    coordinator.WaitAssignmentAsync(
        worker, Now() + absl::Seconds(600),
        [&cluster, &assigned, worker](absl::StatusOr<std::optional<v1::Assignment>> result) {
          Check(result.status(), "WaitAssignment");
          if (!result->has_value()) return;
          cluster->assignments[(*result)->rank()] = **result;
          cluster->rank_workers[(*result)->rank()] = worker;
          ++assigned;
        },
        1);
  }
  v1::JobSpec spec;
  spec.set_name("load");
  spec.set_world_size(n);
  Check(coordinator.SubmitJob(spec).status(), "SubmitJob");
  if (assigned != n) Check(absl::InternalError(absl::StrCat(assigned.load(), " of ", n)), "assign");
  for (const v1::Assignment& a : cluster->assignments) {
    cluster->attempt = AttemptId{JobId(a.job_id()), Generation(a.generation())};
    Check(coordinator.JoinJob(cluster->attempt, Rank(a.rank()), cluster->rank_workers[a.rank()],
                              a.spec_fingerprint()),
          "JoinJob");
  }
  cluster->setup = Now() - start;
  return cluster;
}

// Counts the calls of a simulated rendezvous and the value bytes they were answered with.
struct KvTally {
  uint64_t sets = 0;
  uint64_t gets = 0;
  uint64_t get_manys = 0;
  uint64_t bytes = 0;
  absl::Duration took;
  uint64_t calls() const { return sets + gets + get_manys; }
};

std::string Prefix(const AttemptId& attempt) {
  return absl::StrCat(attempt.job.value(), "/", attempt.generation.value(), "/gloo/");
}

std::string Hostname(uint32_t r) { return absl::StrCat("host-", r / kRanksPerHost); }

std::string Blob(uint32_t n, uint32_t r) {
  return std::string(static_cast<size_t>(n - 1) * absl::GetFlag(FLAGS_address_bytes),
                     static_cast<char>('a' + r % 26));
}

// (a): key by key, as connectFullMesh through KvGlooStore did before KvGetMany.
KvTally RendezvousKeyByKey(Cluster& cluster, uint32_t n) {
  Coordinator& c = *cluster.coordinator;
  const std::string prefix = Prefix(cluster.attempt);
  const absl::Time deadline = Now() + absl::Seconds(600);
  KvTally tally;
  auto got = [&tally](absl::StatusOr<std::string> value) {
    Check(value.status(), "KvGet");
    tally.bytes += value->size();
  };
  const absl::Time start = Now();
  for (uint32_t r = 0; r < n; ++r) {
    Check(c.KvSet(cluster.attempt, absl::StrCat(prefix, "rank_", r), Hostname(r)), "KvSet");
    ++tally.sets;
  }
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t i = 0; i < r; ++i) {
      c.KvGetAsync(cluster.attempt, absl::StrCat(prefix, "rank_", i), deadline, got);
      ++tally.gets;
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    Check(c.KvSet(cluster.attempt, absl::StrCat(prefix, r), Blob(n, r)), "KvSet");
    ++tally.sets;
  }
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t i = 0; i < n; ++i) {
      if (i == r) continue;
      for (int twice = 0; twice < 2; ++twice) {  // KvGlooStore's wait, then its get
        c.KvGetAsync(cluster.attempt, absl::StrCat(prefix, i), deadline, got);
        ++tally.gets;
      }
    }
  }
  tally.took = Now() - start;
  return tally;
}

// (b): batched, as KvGlooStore does with KvGetMany.
KvTally RendezvousBatched(Cluster& cluster, uint32_t n) {
  Coordinator& c = *cluster.coordinator;
  const std::string prefix = Prefix(cluster.attempt);
  const absl::Time deadline = Now() + absl::Seconds(600);
  KvTally tally;
  auto got = [&tally](absl::StatusOr<std::vector<std::string>> values) {
    Check(values.status(), "KvGetMany");
    for (const std::string& value : *values) tally.bytes += value.size();
  };
  const absl::Time start = Now();
  for (uint32_t r = 0; r < n; ++r) {
    Check(c.KvSet(cluster.attempt, absl::StrCat(prefix, "rank_", r), Hostname(r)), "KvSet");
    ++tally.sets;
  }
  for (uint32_t r = 1; r < n; ++r) {
    std::vector<std::string> keys;
    keys.reserve(r);
    for (uint32_t i = 0; i < r; ++i) keys.push_back(absl::StrCat(prefix, "rank_", i));
    c.KvGetManyAsync(cluster.attempt, std::move(keys), KvParts{}, deadline, got);
    ++tally.get_manys;
  }
  for (uint32_t r = 0; r < n; ++r) {
    Check(c.KvSet(cluster.attempt, absl::StrCat(prefix, r), Blob(n, r)), "KvSet");
    ++tally.sets;
  }
  for (uint32_t r = 0; r < n; ++r) {
    std::vector<std::string> keys;
    KvParts parts{n - 1, {}};
    keys.reserve(n - 1);
    parts.index.reserve(n - 1);
    for (uint32_t i = 0; i < n; ++i) {
      if (i == r) continue;
      keys.push_back(absl::StrCat(prefix, i));
      parts.index.push_back(r > i ? r - 1 : r);
    }
    c.KvGetManyAsync(cluster.attempt, std::move(keys), std::move(parts), deadline, got);
    ++tally.get_manys;
  }
  tally.took = Now() - start;
  return tally;
}

// Runs body(thread, &calls) on --threads threads until --seconds passed; returns calls/s.
template <typename Body>
double Sustained(Body body, uint64_t* total_calls) {
  const int threads = absl::GetFlag(FLAGS_threads);
  const absl::Duration run = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::atomic<uint64_t> calls{0};
  const absl::Time start = Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t mine = 0;
      while (Now() - start < run) mine += body(t);
      calls += mine;
    });
  }
  for (std::thread& thread : pool) thread.join();
  const absl::Duration took = Now() - start;
  *total_calls = calls;
  return static_cast<double>(calls) / absl::ToDoubleSeconds(took);
}

// (c): every worker of thread t's share heartbeats once per round; returns heartbeats sent.
uint64_t HeartbeatRound(Cluster& cluster, int t) {
  const int threads = absl::GetFlag(FLAGS_threads);
  uint64_t sent = 0;
  for (size_t w = static_cast<size_t>(t); w < cluster.workers.size(); w += threads) {
    Check(cluster.coordinator->Heartbeat(cluster.workers[w], 1).status(), "Heartbeat");
    ++sent;
  }
  return sent;
}


// (d): thread t's ranks each report their next batch of 20 steps; returns rank-steps sent.
uint64_t ReportRound(Cluster& cluster, int t, std::vector<uint64_t>* next_step) {
  const int threads = absl::GetFlag(FLAGS_threads);
  uint64_t sent = 0;
  std::vector<v1::StepReport> steps(kStepsPerReport);
  for (uint32_t r = static_cast<uint32_t>(t); r < cluster.assignments.size(); r += threads) {
    uint64_t& step = (*next_step)[r];
    for (v1::StepReport& report : steps) report = StepOf(++step, r);
    absl::StatusOr<Coordinator::StopSignal> stop =
        cluster.coordinator->ReportProgress(cluster.attempt, Rank(r), steps, {});
    Check(stop.status(), "ReportProgress");
    if (stop->stop) Check(absl::AbortedError(stop->reason), "ReportProgress stop");
    sent += kStepsPerReport;
  }
  return sent;
}


void Line(uint32_t n, const char* label, const Cluster& cluster, const KvTally& kv,
          const char* calls) {
  std::printf(
      "ranks=%-5u %s register+assign+join %.3f s + rendezvous %.3f s = %.3f s; %s KV calls "
      "(%s KvSet + %s), %.1f MB of values answered\n",
      n, label, absl::ToDoubleSeconds(cluster.setup), absl::ToDoubleSeconds(kv.took),
      absl::ToDoubleSeconds(cluster.setup + kv.took), Thousands(kv.calls()).c_str(),
      Thousands(kv.sets).c_str(), calls, kv.bytes / 1e6);
}

void Measure(uint32_t n) {
  {
    std::unique_ptr<Cluster> cluster = StartJob(n);
    const KvTally kv = RendezvousKeyByKey(*cluster, n);
    Line(n, "(a) key by key:", *cluster, kv, absl::StrCat(Thousands(kv.gets), " KvGet").c_str());
  }
  std::unique_ptr<Cluster> cluster = StartJob(n);
  const KvTally kv = RendezvousBatched(*cluster, n);
  Line(n, "(b) KvGetMany: ", *cluster, kv,
       absl::StrCat(Thousands(kv.get_manys), " KvGetMany").c_str());

  uint64_t heartbeats = 0;
  const double heartbeat_rate =
      Sustained([&](int t) { return HeartbeatRound(*cluster, t); }, &heartbeats);
  std::printf("ranks=%-5u (c) heartbeats: %s/s (%s in %.1f s from %d threads)\n", n,
              Thousands(heartbeat_rate).c_str(), Thousands(heartbeats).c_str(),
              absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads));

  std::vector<uint64_t> next_step(n, 0);
  uint64_t rank_steps = 0;
  const double step_rate =
      Sustained([&](int t) { return ReportRound(*cluster, t, &next_step); }, &rank_steps);
  absl::StatusOr<v1::JobStatus> job = cluster->coordinator->GetJob(cluster->attempt.job);
  Check(job.status(), "GetJob");
  std::printf(
      "ranks=%-5u (d) ReportProgress: %s rank-steps/s (%s rank-steps, %d per call, %.1f s, %d "
      "threads; %llu steps judged, %d alarms)\n",
      n, Thousands(step_rate).c_str(), Thousands(rank_steps).c_str(), kStepsPerReport,
      absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads),
      static_cast<unsigned long long>(job->verdict().steps_judged()), job->alarms_size());
  std::fflush(stdout);
}

int Main() {
  std::vector<uint32_t> sizes;
  for (const std::string& text : absl::GetFlag(FLAGS_ranks)) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 2) {
      std::fprintf(stderr, "--ranks: \"%s\" is not a world size >= 2\n", text.c_str());
      return 2;
    }
    sizes.push_back(n);
  }
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_seconds) <= 0 ||
      absl::GetFlag(FLAGS_address_bytes) < 1) {
    std::fprintf(stderr, "--threads, --seconds and --address_bytes must be positive\n");
    return 2;
  }
  std::printf(
      "coordinator core in process, real clock; rendezvous calls phase by phase (no waiting); "
      "goals: 1024 ranks (b) < 1 s, heartbeats >= 50 000/s\n");
  for (uint32_t n : sizes) Measure(n);
  return 0;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringleader::Main();
}
