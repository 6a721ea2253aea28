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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/bench/load_benchmark_util.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/server/coordinator_instance.h"
#include "proto/ringleader.pb.h"

ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"64", "256", "1024"}),
          "World sizes to measure, comma-separated.");
ABSL_FLAG(int, threads, 2, "Threads sending heartbeats and step reports in (c) and (d).");
ABSL_FLAG(double, seconds, 1.0, "How long (c) and (d) run.");
ABSL_FLAG(int, address_bytes, 136,
          "Bytes of one gloo pair address (gloo's tcp Address: sockaddr_storage + sequence).");

namespace ringleader {
namespace {

using bench::Check;
using bench::Checked;
using bench::Hostname;
using bench::KvPrefix;
using bench::kStepsPerReport;
using bench::Rate;
using bench::StepOf;
using bench::Thousands;

absl::Time Now() { return absl::Now(); }

std::string Blob(uint32_t n, uint32_t r) {
  return bench::Blob(n, r, static_cast<size_t>(absl::GetFlag(FLAGS_address_bytes)));
}

// One coordinator (the server's core: store, core and handler, no gRPC, no ticker: every
// deadline here is far away) with N registered workers whose job of world size N is assigned
// and joined.
struct Cluster {
  std::unique_ptr<CoordinatorInstance> instance;
  Coordinator* coordinator = nullptr;
  std::vector<WorkerId> workers;
  std::vector<v1::Assignment> assignments;  // by rank
  std::vector<WorkerId> rank_workers;       // by rank
  AttemptId attempt;
  std::string prefix;    // of the attempt's rendezvous keys
  absl::Duration setup;  // register + assign + join
};

std::unique_ptr<Cluster> StartJob(uint32_t n) {
  auto cluster = std::make_unique<Cluster>();
  CoordinatorInstanceOptions options;
  options.coordinator = bench::LoadOptions(n);
  options.check_every = absl::ZeroDuration();
  cluster->instance = Checked(CoordinatorInstance::Start(std::move(options)), "start");
  Coordinator& coordinator = cluster->instance->coordinator();
  cluster->coordinator = &coordinator;
  cluster->assignments.resize(n);
  cluster->rank_workers.resize(n);
  std::atomic<uint32_t> assigned{0};

  const absl::Time start = Now();
  v1::Device device;
  device.set_kind("cpu");
  for (uint32_t w = 0; w < n; ++w) {
    cluster->workers.push_back(
        Checked(coordinator.RegisterWorker(absl::StrCat("worker-", w), Hostname(w), {device}, 1),
                "RegisterWorker")
            .id);
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
  cluster->prefix = KvPrefix(cluster->attempt.job.value(), cluster->attempt.generation.value());
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

// (a): key by key, as connectFullMesh through KvGlooStore did before KvGetMany.
KvTally RendezvousKeyByKey(Cluster& cluster, uint32_t n) {
  Coordinator& c = *cluster.coordinator;
  const std::string& prefix = cluster.prefix;
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
  const std::string& prefix = cluster.prefix;
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
    c.KvGetManyAsync(cluster.attempt, bench::HostnameKeys(prefix, r), KvParts{}, deadline, got);
    ++tally.get_manys;
  }
  for (uint32_t r = 0; r < n; ++r) {
    Check(c.KvSet(cluster.attempt, absl::StrCat(prefix, r), Blob(n, r)), "KvSet");
    ++tally.sets;
  }
  for (uint32_t r = 0; r < n; ++r) {
    bench::PeerKeys peers = bench::AddressKeys(prefix, n, r);
    c.KvGetManyAsync(cluster.attempt, std::move(peers.keys), std::move(peers.parts), deadline,
                     got);
    ++tally.get_manys;
  }
  tally.took = Now() - start;
  return tally;
}

// Runs body(t) on --threads threads t until --seconds passed.
Rate Sustained(const std::function<uint64_t(int)>& body) {
  return bench::Sustained(absl::GetFlag(FLAGS_threads),
                          absl::Seconds(absl::GetFlag(FLAGS_seconds)), body);
}

// (c): every worker of thread t's share heartbeats once per round; returns heartbeats sent.
uint64_t HeartbeatRound(Cluster& cluster, int t) {
  return bench::ForShare(t, absl::GetFlag(FLAGS_threads), cluster.workers.size(), [&](size_t w) {
    Check(cluster.coordinator->Heartbeat(cluster.workers[w], 1).status(), "Heartbeat");
  });
}

// (d): thread t's ranks each report their next batch of 20 steps; returns rank-steps sent.
uint64_t ReportRound(Cluster& cluster, int t, std::vector<uint64_t>* next_step) {
  std::vector<v1::StepReport> steps(kStepsPerReport);
  auto report_batch = [&](size_t r) {
    const uint32_t rank = static_cast<uint32_t>(r);
    uint64_t& step = (*next_step)[r];
    for (v1::StepReport& report : steps) report = StepOf(++step, rank);
    const Coordinator::StopSignal stop = Checked(
        cluster.coordinator->ReportProgress(cluster.attempt, Rank(rank), steps, {}),
        "ReportProgress");
    if (stop.stop) Check(absl::AbortedError(stop.reason), "ReportProgress stop");
  };
  return kStepsPerReport * bench::ForShare(t, absl::GetFlag(FLAGS_threads),
                                           cluster.assignments.size(), report_batch);
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

  const Rate heartbeats = Sustained([&](int t) { return HeartbeatRound(*cluster, t); });
  std::printf("ranks=%-5u (c) heartbeats: %s/s (%s in %.1f s from %d threads)\n", n,
              Thousands(heartbeats.per_second).c_str(),
              Thousands(static_cast<double>(heartbeats.units)).c_str(),
              absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads));

  std::vector<uint64_t> next_step(n, 0);
  const Rate steps = Sustained([&](int t) { return ReportRound(*cluster, t, &next_step); });
  absl::StatusOr<v1::JobStatus> job = cluster->coordinator->GetJob(cluster->attempt.job);
  Check(job.status(), "GetJob");
  std::printf(
      "ranks=%-5u (d) ReportProgress: %s rank-steps/s (%s rank-steps, %d per call, %.1f s, %d "
      "threads; %llu steps judged, %d alarms)\n",
      n, Thousands(steps.per_second).c_str(), Thousands(static_cast<double>(steps.units)).c_str(),
      kStepsPerReport, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads),
      static_cast<unsigned long long>(job->verdict().steps_judged()), job->alarms_size());
  std::fflush(stdout);
}

int Main() {
  const std::vector<uint32_t> sizes = bench::WorldSizesOrExit(absl::GetFlag(FLAGS_ranks));
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
