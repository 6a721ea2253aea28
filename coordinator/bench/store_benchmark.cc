// The job stores' write path: JobStore::Save of realistic JobStatus records (an 8-rank job with
// its spec, transitions, ranks' last steps, an attempt and events; each Save a new version of
// one of --jobs jobs, as the coordinator saves on every transition), to SQLite (a temporary
// state directory) and to etcd (one member this binary starts on loopback with its data in the
// same temporary directory, or --etcd_endpoints). Each store runs sequentially (one thread) and
// with --threads threads at once (each on jobs of its own), --saves saves per run. Prints
// saves/s and the p50/p99 of one Save (it returns once committed: fsync'd by SQLite, by a
// quorum for etcd), and etcd's figures over SQLite's measured in the same run.
//
//   bazel run -c opt //coordinator/bench:store_benchmark_grpc -- --saves=2000 --threads=8
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/store/etcd/etcd_job_store.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "coordinator/store/sqlite_job_store.h"
#include "proto/ringleader.pb.h"

ABSL_FLAG(int, saves, 2000, "Save() calls per run (store x sequential/concurrent).");
ABSL_FLAG(int, threads, 8, "Threads saving at once in the concurrent runs.");
ABSL_FLAG(int, jobs, 64, "Distinct jobs the saves go to (each save: the job's next version).");
ABSL_FLAG(int, ranks, 8, "Ranks of each job (the record's size grows with them).");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "Comma-separated http://host:port of an etcd to use (keys under a prefix of this run's "
          "own, deleted at the end); empty: start a one-member etcd on loopback.");

namespace ringleader {
namespace {

namespace fs = std::filesystem;

// A running job as the coordinator saves it: spec, transitions, ranks with their last step,
// the current attempt, epochs and events.
v1::JobStatus Record(int job, uint64_t version, int ranks) {
  v1::JobStatus s;
  s.set_job_id(absl::StrFormat("job-%06d", job + 1));
  s.set_version(version);
  s.set_state(v1::JOB_STATE_RUNNING);
  s.set_generation(1);
  s.set_spec_fingerprint("9f2c4e1b7a3d5f60");
  s.set_submit_time_unix_ms(1700000000000);
  v1::JobSpec* spec = s.mutable_spec();
  spec->set_name(absl::StrCat("mlp-fashion-mnist-", job));
  spec->set_world_size(ranks);
  spec->set_backend("gloo");
  spec->set_strategy("ddp");
  spec->set_epochs(10);
  spec->set_batch_size(64);
  spec->set_checkpoint_dir(absl::StrCat("/var/lib/ringleader/checkpoints/job-", job));
  spec->set_max_steps(20000);
  spec->set_checkpoint_interval_steps(500);
  const char* states[] = {"queued", "rendezvous", "running"};
  for (int i = 0; i < 3; ++i) {
    v1::StateTransition* t = s.add_transitions();
    t->set_state(static_cast<v1::JobState>(i + 1));
    t->set_time_unix_ms(1700000000000 + 1000 * i);
    t->set_reason(absl::StrCat("entered ", states[i]));
  }
  for (int r = 0; r < ranks; ++r) {
    v1::RankStatus* rank = s.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(absl::StrCat("worker-", r));
    rank->set_worker_name(absl::StrCat("gpu-node-", r / 8, "-slot-", r % 8));
    rank->set_host(absl::StrCat("10.0.", r / 8, ".", 10 + r % 8, ":29500"));
    rank->set_joined(true);
    rank->set_heartbeat_age_ms(120);
    v1::StepReport* step = rank->mutable_last_step();
    step->set_step(version * 10);
    step->set_loss(0.42);
    step->set_local_grad_norm(1.3);
    step->set_synced_grad_norm(1.2);
    step->set_step_ms(11.5);
    step->set_compute_ms(7.0);
    step->set_comm_ms(4.5);
    step->set_collective_digest(0x5eed0000 + version);
    step->set_collectives(12);
  }
  v1::AttemptSummary* attempt = s.add_attempts();
  attempt->set_generation(1);
  attempt->set_start_time_unix_ms(1700000002000);
  for (int r = 0; r < ranks; ++r) attempt->add_workers(absl::StrCat("worker-", r));
  attempt->set_last_step(version * 10);
  for (int e = 0; e < 2; ++e) {
    v1::EpochReport* epoch = s.add_epochs();
    epoch->set_epoch(e);
    epoch->set_test_accuracy(0.80 + 0.03 * e);
    epoch->set_test_loss(0.5 - 0.05 * e);
    epoch->set_train_loss(0.55 - 0.05 * e);
  }
  for (int e = 0; e < 4; ++e) {
    v1::JobEvent* event = s.add_events();
    event->set_time_unix_ms(1700000000000 + 500 * e);
    event->set_message(absl::StrCat("rank ", e, " joined the rendezvous from worker-", e));
  }
  s.set_last_checkpoint(absl::StrCat(spec->checkpoint_dir(), "/step-000500"));
  s.set_last_checkpoint_step(500);
  return s;
}

struct Figures {
  double saves_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

// `saves` Saves spread over `threads` threads, thread t saving jobs t, t+threads, ... (below
// `jobs`) with increasing versions. Exits the process on the first failed Save.
Figures Run(JobStore& store, int saves, int threads, int jobs, int ranks, const char* what) {
  // The records, built before timing.
  std::vector<std::vector<v1::JobStatus>> work(threads);
  std::vector<uint64_t> version(jobs, 0);
  for (int i = 0; i < saves; ++i) {
    const int t = i % threads;
    const int per_thread = std::max(1, jobs / threads);
    const int job = t + threads * ((i / threads) % per_thread);
    work[t].push_back(Record(job, ++version[job], ranks));
  }
  std::vector<std::vector<double>> latencies(threads);
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (const v1::JobStatus& record : work[t]) {
        const absl::Time before = absl::Now();
        const absl::Status saved = store.Save(record);
        latencies[t].push_back(absl::ToDoubleMilliseconds(absl::Now() - before));
        if (!saved.ok()) {
          std::fprintf(stderr, "FAILED: %s: Save(%s): %s\n", what, record.job_id().c_str(),
                       saved.ToString().c_str());
          std::exit(1);
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto quantile = [&](double q) {
    return all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))];
  };
  return Figures{saves / seconds, quantile(0.50), quantile(0.99)};
}

// Every job saved, each at its last version: the runs wrote what they claim.
bool Check(const JobStore& store, int saves, int threads, int jobs, const char* what) {
  std::vector<uint64_t> expected(jobs, 0);
  for (int i = 0; i < saves; ++i) {
    const int t = i % threads;
    const int per_thread = std::max(1, jobs / threads);
    ++expected[t + threads * ((i / threads) % per_thread)];
  }
  absl::StatusOr<std::vector<v1::JobStatus>> loaded = store.LoadAll();
  if (!loaded.ok()) {
    std::fprintf(stderr, "FAILED: %s: LoadAll: %s\n", what, loaded.status().ToString().c_str());
    return false;
  }
  size_t want = 0;
  for (uint64_t v : expected) want += v > 0;
  bool ok = loaded->size() == want;
  for (const v1::JobStatus& job : *loaded) {
    const std::optional<uint64_t> n = JobNumber(job.job_id());
    ok = ok && n.has_value() && *n >= 1 && *n <= static_cast<uint64_t>(jobs) &&
         job.version() == expected[*n - 1];
  }
  if (!ok) std::fprintf(stderr, "FAILED: %s: the stored jobs are not the last saves\n", what);
  return ok;
}

int Main() {
  const int saves = absl::GetFlag(FLAGS_saves);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int jobs = absl::GetFlag(FLAGS_jobs);
  const int ranks = absl::GetFlag(FLAGS_ranks);
  if (saves < 1 || threads < 1 || jobs < threads || ranks < 1) {
    std::fprintf(stderr, "--saves, --threads, --ranks must be >= 1 and --jobs >= --threads\n");
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (fs::path(tmp ? tmp : "/tmp") / "store-benchmark-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path dir = pattern;

  std::unique_ptr<etcd::EtcdTestProcess> etcd_process;
  std::vector<std::string> endpoints =
      absl::StrSplit(absl::GetFlag(FLAGS_etcd_endpoints), ',', absl::SkipEmpty());
  if (endpoints.empty()) {
    absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>> started =
        etcd::EtcdTestProcess::Start("store-benchmark", absl::Seconds(30), dir.string());
    if (!started.ok()) {
      std::fprintf(stderr, "FAILED: starting etcd: %s\n", started.status().ToString().c_str());
      fs::remove_all(dir);
      return 1;
    }
    etcd_process = std::move(*started);
    endpoints = {etcd_process->endpoint()};
  }
  const std::string run_prefix = absl::StrCat("/store-benchmark-", getpid(), "-",
                                              absl::ToUnixMillis(absl::Now()), "/");

  const std::string record_bytes = Record(0, 1, ranks).SerializeAsString();
  std::printf("store benchmark: %d saves per run, %d jobs, records of %zu bytes (%d ranks)\n",
              saves, jobs, record_bytes.size(), ranks);
  std::printf("  sqlite: %s/sqlite-*/coordinator.db; etcd: %s%s\n", dir.c_str(),
              endpoints[0].c_str(), etcd_process ? " (one member started here, data in the same "
                                                   "directory)" : "");
  std::printf("  %-7s %-12s %10s %9s %9s\n", "store", "run", "saves/s", "p50 ms", "p99 ms");

  bool ok = true;
  Figures figures[2][2];  // [sqlite, etcd][sequential, concurrent]
  const int modes[2] = {1, threads};
  for (int m = 0; m < 2; ++m) {
    const std::string run = m == 0 ? "sequential" : absl::StrCat(threads, " threads");
    {
      const std::string what = absl::StrCat("sqlite ", run);
      absl::StatusOr<std::unique_ptr<SqliteJobStore>> store =
          SqliteJobStore::Open((dir / absl::StrCat("sqlite-", m)).string());
      if (!store.ok()) {
        std::fprintf(stderr, "FAILED: %s\n", store.status().ToString().c_str());
        return 1;
      }
      figures[0][m] = Run(**store, saves, modes[m], jobs, ranks, what.c_str());
      ok = Check(**store, saves, modes[m], jobs, what.c_str()) && ok;
      std::printf("  %-7s %-12s %10.0f %9.2f %9.2f\n", "sqlite", run.c_str(),
                  figures[0][m].saves_per_s, figures[0][m].p50_ms, figures[0][m].p99_ms);
    }
    {
      const std::string what = absl::StrCat("etcd ", run);
      etcd::EtcdKvGrpcOptions kv_options;
      kv_options.endpoints = endpoints;
      absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(kv_options);
      if (!kv.ok()) {
        std::fprintf(stderr, "FAILED: %s\n", kv.status().ToString().c_str());
        return 1;
      }
      EtcdJobStoreOptions options;
      options.prefix = absl::StrCat(run_prefix, m, "/");
      absl::StatusOr<std::unique_ptr<EtcdJobStore>> store =
          EtcdJobStore::Create(std::move(*kv), options);
      if (!store.ok()) {
        std::fprintf(stderr, "FAILED: %s\n", store.status().ToString().c_str());
        return 1;
      }
      figures[1][m] = Run(**store, saves, modes[m], jobs, ranks, what.c_str());
      ok = Check(**store, saves, modes[m], jobs, what.c_str()) && ok;
      std::printf("  %-7s %-12s %10.0f %9.2f %9.2f\n", "etcd", run.c_str(),
                  figures[1][m].saves_per_s, figures[1][m].p50_ms, figures[1][m].p99_ms);
    }
  }
  for (int m = 0; m < 2; ++m) {
    std::printf("  etcd/sqlite %-12s saves/s %5.2fx   p50 %5.2fx   p99 %5.2fx\n",
                m == 0 ? "sequential" : absl::StrCat(threads, " threads").c_str(),
                figures[1][m].saves_per_s / figures[0][m].saves_per_s,
                figures[1][m].p50_ms / figures[0][m].p50_ms,
                figures[1][m].p99_ms / figures[0][m].p99_ms);
  }

  if (!etcd_process) {  // someone else's etcd: leave nothing behind
    etcd::EtcdKvGrpcOptions kv_options;
    kv_options.endpoints = endpoints;
    absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(kv_options);
    if (kv.ok()) (*kv)->DeleteRange(run_prefix, etcd::PrefixEnd(run_prefix)).IgnoreError();
  }
  etcd_process.reset();
  fs::remove_all(dir);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringleader::Main();
}
