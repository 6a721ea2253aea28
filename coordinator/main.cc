// ringleader-coordinator: serves WorkerService and JobService until SIGINT or SIGTERM.
//
//   ringleader-coordinator --listen=127.0.0.1:7070 --port_file=/run/ringleader/port
//
// Prints the bound address on stdout once listening (useful with --listen=HOST:0) and writes it
// to --port_file atomically; logs job transitions and worker registrations/losses to stderr.
// Serves Prometheus metrics at http://<--http_listen>/metrics and the web dashboard at
// http://<--http_listen>/ (the log names the address).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tls/tls_credentials.h"
#include "coordinator/core/options.h"
#include "coordinator/rpc/token_store.h"
#include "absl/strings/str_split.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/ha_coordinator.h"
#include "coordinator/store/etcd/etcd_import.h"
#include "grpcpp/security/server_credentials.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "host:port to serve on; port 0 picks a free port (printed, and written to --port_file)");
ABSL_FLAG(std::string, tls_dir, "",
          "mutual TLS: DIR/ca.pem, DIR/coordinator.pem, DIR/coordinator.key (deploy/certs.sh "
          "makes them); every client must present a certificate signed by ca.pem. Required "
          "unless --insecure");
ABSL_FLAG(bool, insecure, false, "plaintext gRPC (no TLS): for a single trusted host only");
ABSL_FLAG(std::string, tokens_file, "",
          "bearer tokens of the JobService, 'NAME TOKEN' per line (re-read on SIGHUP): every "
          "JobService call must carry one (the CLI's --token_file or RINGLEADER_TOKEN). Empty = "
          "any client with a certificate of the cluster may submit and cancel");
ABSL_FLAG(bool, anonymous_reads, false,
          "with --tokens_file: read-only JobService calls (status, list, watch, logs, metrics) "
          "need no token");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(2),
          "how often workers are told to send a heartbeat");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(10),
          "a worker silent for longer is declared lost and its job fails");
ABSL_FLAG(absl::Duration, rendezvous_timeout, absl::Seconds(120),
          "every rank of an assigned job must join within this long, else the job fails");
ABSL_FLAG(absl::Duration, max_wait, absl::Seconds(30),
          "cap on how long a long poll (WaitAssignment, KvGet, WatchJob) is held");
ABSL_FLAG(absl::Duration, silent_rank_after, absl::Seconds(5),
          "When a rank fails, name the other ranks whose process has been silent this long as "
          "suspects (rank processes send a keepalive every second).");
ABSL_FLAG(absl::Duration, peer_failure_grace, absl::Seconds(2),
          "A rank's failure that is a peer's consequence (connection closed by peer, a peer's "
          "abort) waits this long for the peer's own report to name the failure (0 = never).");
ABSL_FLAG(absl::Duration, restart_backoff, absl::Seconds(1),
          "A failed job with restarts left (spec max_restarts) is placed again at once, unless "
          "its failing rank or worker failed it before within --crash_loop_window: then after "
          "this long, doubling with each further repeat.");
ABSL_FLAG(absl::Duration, max_restart_backoff, absl::Seconds(30),
          "cap on the doubling restart backoff");
ABSL_FLAG(absl::Duration, crash_loop_window, absl::Minutes(5),
          "A job's failure is a crash loop (its restart waits --restart_backoff, doubling) when "
          "the same rank or worker failed an attempt of the job within this long before.");
ABSL_FLAG(absl::Duration, coordinator_grace, absl::Seconds(60),
          "How long workers keep their ranks training while this coordinator cannot be reached, "
          "and how long a restarted coordinator waits for a running job's workers to come back "
          "before restarting the job from its last checkpoint. 0 = a coordinator restart always "
          "restarts running jobs.");
ABSL_FLAG(std::string, state_dir, "",
          "Directory of the durable job store (SQLite, coordinator.db): jobs, their transitions, "
          "attempts and alarms survive a restart and ids never repeat. Empty = jobs are kept in "
          "memory only and lost when the coordinator stops.");
ABSL_FLAG(int, max_queued_jobs, 1000,
          "SubmitJob refuses new jobs while this many are queued (RESOURCE_EXHAUSTED).");
ABSL_FLAG(int, max_reports_per_second, 200,
          "ReportProgress calls one rank of an attempt may make per second (keepalives "
          "included), in bursts of as many; beyond it a call is refused with RESOURCE_EXHAUSTED "
          "and the rank retries it later. 0 = no limit.");
ABSL_FLAG(int64_t, jobs_kept, 1000,
          "Finished jobs (succeeded, failed, cancelled) kept in memory, at least 1. Beyond it, the "
          "ones that ended first are archived: dropped from memory (with their metrics and logs) "
          "and moved to the job store's archive, where 'ringleader status JOB' and 'ringleader "
          "list --archived' still read their final status. Queued and running jobs are never "
          "archived.");
ABSL_FLAG(bool, allow_fault_injection, false,
          "Accept job specs with model.faults (fault injection). Tests and demos only.");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:7071",
          "host:port of the HTTP server: Prometheus metrics at /metrics, the web dashboard at / "
          "and its JSON API under /api/ (port 0 picks a free port; the log names it). Empty = no "
          "HTTP server.");
ABSL_FLAG(std::string, store, "sqlite",
          "Where the job state lives: 'sqlite' (embedded, under --state_dir; in memory without "
          "it) or 'etcd' (--etcd_endpoints): several coordinators on one etcd elect a leader, "
          "the others stand by and take over within seconds when it is lost.");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "--store=etcd: the etcd cluster's client URLs, http://host:port[,...] (every member, "
          "so that losing one does not matter).");
ABSL_FLAG(std::string, etcd_prefix, "/ringleader/",
          "--store=etcd: the prefix of every key this coordinator group uses (one group per "
          "prefix).");
ABSL_FLAG(absl::Duration, etcd_call_timeout, absl::Seconds(2),
          "--store=etcd: the deadline of each call to an etcd member.");
ABSL_FLAG(absl::Duration, leader_lease_ttl, absl::Seconds(3),
          "--store=etcd: the leader's lease; a lost leader is replaced this long after its last "
          "renewal at most (at least 2s: etcd's lease granularity is a second).");
ABSL_FLAG(std::string, advertise, "",
          "--store=etcd: this coordinator's host:port as clients dial it, which standbys send "
          "clients to. Empty = the bound --listen address (with 0.0.0.0: the host name).");
ABSL_FLAG(std::string, import_state_dir, "",
          "--store=etcd: before starting, copy the jobs, archive and attempt secret of this "
          "SQLite state directory (a stopped coordinator's --state_dir) into etcd under "
          "--etcd_prefix; refused when anything is there already.");
ABSL_FLAG(std::string, port_file, "",
          "if set, the bound host:port is written to this file (atomically) once listening");

namespace ringleader {
namespace {

// How often health is checked: bounds how late a lease expiry or long-poll deadline is noticed.
constexpr absl::Duration kTick = absl::Milliseconds(100);
// How long in-flight calls may finish after a shutdown signal.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

void Log(absl::Time time, const std::string& line) {
  const std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  std::fprintf(stderr, "%s ringleader-coordinator: %s\n", stamp.c_str(), line.c_str());
}

absl::Status WritePortFile(const std::string& path, const std::string& address) {
  // Written under a temporary name and renamed, so readers never see a partial address.
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << address << "\n";
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("--port_file: cannot write ", temporary, ": does its directory exist?"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("--port_file: cannot rename ", temporary, " to ",
                                               path));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* flag, absl::Duration value) {
  if (value > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be > 0, got ",
                                                 absl::FormatDuration(value)));
}

// --store=etcd's options, from the flags. Errors: INVALID_ARGUMENT naming the flag.
absl::StatusOr<HaCoordinatorOptions> EtcdOptions(CoordinatorServerOptions server) {
  HaCoordinatorOptions ha;
  ha.server = std::move(server);
  for (absl::string_view endpoint :
       absl::StrSplit(absl::GetFlag(FLAGS_etcd_endpoints), ',', absl::SkipWhitespace())) {
    ha.etcd.endpoints.emplace_back(endpoint);
  }
  if (ha.etcd.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--store=etcd needs --etcd_endpoints=http://host:port[,...] (every etcd member)");
  }
  ha.etcd.call_timeout = absl::GetFlag(FLAGS_etcd_call_timeout);
  ha.store.prefix = absl::GetFlag(FLAGS_etcd_prefix);
  if (ha.store.prefix.empty() || ha.store.prefix.back() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "--etcd_prefix must end with '/', got '", ha.store.prefix, "' (e.g. /ringleader/)"));
  }
  ha.lease_ttl = absl::GetFlag(FLAGS_leader_lease_ttl);
  if (ha.lease_ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--leader_lease_ttl must be at least 2s (etcd counts leases in seconds), got ",
        absl::FormatDuration(ha.lease_ttl)));
  }
  if (ha.etcd.call_timeout <= absl::ZeroDuration() || ha.etcd.call_timeout >= ha.lease_ttl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--etcd_call_timeout must be > 0 and below --leader_lease_ttl (",
        absl::FormatDuration(ha.lease_ttl), "), got ", absl::FormatDuration(ha.etcd.call_timeout)));
  }
  ha.advertise = absl::GetFlag(FLAGS_advertise);
  return ha;
}

// --import_state_dir: copies the SQLite state into etcd before the coordinator starts.
absl::Status ImportIfAsked(const HaCoordinatorOptions& ha) {
  const std::string dir = absl::GetFlag(FLAGS_import_state_dir);
  if (dir.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(ha.etcd);
  if (!kv.ok()) return kv.status();
  Log(absl::Now(), absl::StrCat("importing ", dir, " into ", (*kv)->Describe(), " under ",
                                ha.store.prefix));
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir, **kv, ha.store);
  if (!summary.ok()) return summary.status();
  Log(absl::Now(), absl::StrCat("imported ", summary->saved_jobs, " job(s), ",
                                summary->archived_jobs, " archived job(s)",
                                summary->secret_copied ? " and the attempt secret" : "",
                                " from ", dir));
  return absl::OkStatus();
}

int Run() {
  CoordinatorOptions options;
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  options.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  options.max_wait = absl::GetFlag(FLAGS_max_wait);
  options.silent_rank_after = absl::GetFlag(FLAGS_silent_rank_after);
  options.peer_failure_grace = absl::GetFlag(FLAGS_peer_failure_grace);
  if (options.peer_failure_grace < absl::ZeroDuration() ||
      options.peer_failure_grace == absl::InfiniteDuration()) {
    std::fprintf(stderr,
                 "ringleader-coordinator: --peer_failure_grace must be finite and >= 0, got %s\n",
                 absl::FormatDuration(options.peer_failure_grace).c_str());
    return 2;
  }
  options.allow_fault_injection = absl::GetFlag(FLAGS_allow_fault_injection);
  options.restart_backoff = absl::GetFlag(FLAGS_restart_backoff);
  options.max_restart_backoff = absl::GetFlag(FLAGS_max_restart_backoff);
  options.crash_loop_window = absl::GetFlag(FLAGS_crash_loop_window);
  options.coordinator_grace = absl::GetFlag(FLAGS_coordinator_grace);
  if (options.coordinator_grace < absl::ZeroDuration()) {
    std::fprintf(stderr, "ringleader-coordinator: --coordinator_grace must be >= 0, got %s\n",
                 absl::FormatDuration(options.coordinator_grace).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_max_queued_jobs) < 1) {
    std::fprintf(stderr, "ringleader-coordinator: --max_queued_jobs must be >= 1, got %d\n",
                 absl::GetFlag(FLAGS_max_queued_jobs));
    return 2;
  }
  options.max_queued_jobs = static_cast<size_t>(absl::GetFlag(FLAGS_max_queued_jobs));
  if (const int64_t kept = absl::GetFlag(FLAGS_jobs_kept); kept < 1) {
    std::fprintf(stderr,
                 "ringleader-coordinator: --jobs_kept must be >= 1 (finished jobs kept in "
                 "memory; older ones are archived in the job store), got %lld\n",
                 static_cast<long long>(kept));
    return 2;
  }
  options.max_finished_jobs_kept = static_cast<size_t>(absl::GetFlag(FLAGS_jobs_kept));
  if (absl::GetFlag(FLAGS_max_reports_per_second) < 0) {
    std::fprintf(stderr,
                 "ringleader-coordinator: --max_reports_per_second must be >= 0 (0 = no limit), "
                 "got %d\n",
                 absl::GetFlag(FLAGS_max_reports_per_second));
    return 2;
  }
  options.max_reports_per_second_per_rank =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_reports_per_second));
  // Checked before anything is loaded or bound: no TLS files and no --insecure is a usage error.
  const TlsConfig tls{absl::GetFlag(FLAGS_tls_dir), "coordinator", absl::GetFlag(FLAGS_insecure)};
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentialsFor(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "ringleader-coordinator: %s\n",
                 std::string(credentials.status().message()).c_str());
    return 2;
  }
  for (const absl::Status& check :
       {CheckPositive("heartbeat_interval", options.heartbeat_interval),
        CheckPositive("heartbeat_timeout", options.heartbeat_timeout),
        CheckPositive("rendezvous_timeout", options.rendezvous_timeout),
        CheckPositive("max_wait", options.max_wait),
        CheckPositive("silent_rank_after", options.silent_rank_after),
        CheckPositive("restart_backoff", options.restart_backoff),
        CheckPositive("max_restart_backoff", options.max_restart_backoff),
        CheckPositive("crash_loop_window", options.crash_loop_window)}) {
    if (!check.ok()) {
      std::fprintf(stderr, "ringleader-coordinator: %s\n", std::string(check.message()).c_str());
      return 2;
    }
  }

  // SIGINT/SIGTERM are taken by sigwait below: block them before any thread (gRPC's included)
  // starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // re-reads --tokens_file
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<TokenStore> tokens;
  if (const std::string path = absl::GetFlag(FLAGS_tokens_file); !path.empty()) {
    absl::StatusOr<std::unique_ptr<TokenStore>> loaded =
        TokenStore::Load(path, absl::GetFlag(FLAGS_anonymous_reads));
    if (!loaded.ok()) {
      std::fprintf(stderr, "ringleader-coordinator: %s\n",
                   std::string(loaded.status().message()).c_str());
      return 2;
    }
    tokens = std::move(*loaded);
    Log(absl::Now(), absl::StrCat("JobService: ", tokens->size(), " token(s) from ", path,
                                  absl::GetFlag(FLAGS_anonymous_reads)
                                      ? " (reads need none)"
                                      : " (every call needs one)"));
  } else {
    Log(absl::Now(), "JobService: no --tokens_file: any client the TLS layer lets in may "
                     "submit and cancel");
  }

  const std::string store = absl::GetFlag(FLAGS_store);
  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (store != "sqlite" && store != "etcd") {
    std::fprintf(stderr, "ringleader-coordinator: --store must be 'sqlite' or 'etcd', got '%s'\n",
                 store.c_str());
    return 2;
  }
  if (store == "etcd" && !state_dir.empty()) {
    std::fprintf(stderr,
                 "ringleader-coordinator: --state_dir is for --store=sqlite; with --store=etcd "
                 "the state lives in etcd (to move a state dir there once, give it as "
                 "--import_state_dir)\n");
    return 2;
  }
  if (store == "sqlite" && (!absl::GetFlag(FLAGS_etcd_endpoints).empty() ||
                            !absl::GetFlag(FLAGS_import_state_dir).empty())) {
    std::fprintf(stderr,
                 "ringleader-coordinator: --etcd_endpoints and --import_state_dir need "
                 "--store=etcd\n");
    return 2;
  }
  if (store == "sqlite" && state_dir.empty()) {
    Log(absl::Now(), "job store: in memory (no --state_dir): jobs are lost when this stops");
  }
  const std::string http_listen = absl::GetFlag(FLAGS_http_listen);
  CoordinatorServerOptions server_options;
  server_options.instance.coordinator = options;
  server_options.instance.state_dir = state_dir;
  // Per-attempt tokens for the ranks; their secret lives with the state (same tokens after a
  // restart, for the ranks that come back).
  server_options.instance.attempt_tokens = true;
  server_options.instance.log = Log;
  server_options.instance.check_every = kTick;
  server_options.listen = absl::GetFlag(FLAGS_listen);
  server_options.credentials = *credentials;
  server_options.tokens = tokens.get();
  // Started before the port file is written: whoever waits for it may scrape at once.
  server_options.http_listen = http_listen;
  CoordinatorPart failed = CoordinatorPart::kJobStore;
  std::unique_ptr<CoordinatorServer> single;
  std::unique_ptr<HaCoordinator> group;
  absl::Status started;
  if (store == "etcd") {
    absl::StatusOr<HaCoordinatorOptions> ha = EtcdOptions(std::move(server_options));
    if (!ha.ok()) {
      std::fprintf(stderr, "ringleader-coordinator: %s\n",
                   std::string(ha.status().message()).c_str());
      return 2;
    }
    if (absl::Status imported = ImportIfAsked(*ha); !imported.ok()) {
      std::fprintf(stderr, "ringleader-coordinator: --import_state_dir: %s\n",
                   std::string(imported.message()).c_str());
      return 1;
    }
    absl::StatusOr<std::unique_ptr<HaCoordinator>> running =
        HaCoordinator::Start(*std::move(ha), &failed);
    if (running.ok()) group = std::move(*running);
    started = running.status();
  } else {
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> running =
        CoordinatorServer::Start(std::move(server_options), &failed);
    if (running.ok()) single = std::move(*running);
    started = running.status();
  }
  if (!started.ok()) {
    std::string error = started.ToString();
    switch (failed) {
      case CoordinatorPart::kAttemptSecret:
        error = std::string(started.message());
        break;
      case CoordinatorPart::kRestore:
        error = absl::StrCat("loading the job store: ", error);
        break;
      case CoordinatorPart::kHttpServer:
        error = absl::StrCat("--http_listen: ", error);
        break;
      case CoordinatorPart::kJobStore:
      case CoordinatorPart::kGrpcServer:
        break;
    }
    std::fprintf(stderr, "ringleader-coordinator: %s\n", error.c_str());
    return 1;
  }
  const std::string address = single != nullptr ? single->address() : group->address();
  if (http_listen.empty()) {
    Log(absl::Now(), "metrics: no HTTP server (--http_listen is empty)");
  }
  std::printf("ringleader-coordinator listening on %s\n", address.c_str());
  std::fflush(stdout);
  Log(absl::Now(), absl::StrCat("listening on ", address));
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status written = WritePortFile(port_file, address); !written.ok()) {
      std::fprintf(stderr, "ringleader-coordinator: %s\n", written.ToString().c_str());
      return 1;
    }
  }

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (tokens == nullptr) {
      Log(absl::Now(), "received SIGHUP: no --tokens_file to re-read");
      continue;
    }
    const absl::Status reloaded = tokens->Reload();
    Log(absl::Now(), reloaded.ok() ? absl::StrCat("received SIGHUP: ", tokens->size(),
                                                  " token(s) re-read")
                                   : absl::StrCat("received SIGHUP: ", reloaded.message(),
                                                  "; the tokens in use stay"));
  }
  Log(absl::Now(), absl::StrCat("received ", strsignal(signal_number), ": shutting down"));
  // The ticker and the core first (parked long polls are answered, so the server can drain),
  // then the gRPC and HTTP servers.
  if (single != nullptr) single->Shutdown(absl::Now() + kShutdownGrace);
  if (group != nullptr) group->Shutdown(absl::Now() + kShutdownGrace);
  Log(absl::Now(), "stopped");
  return 0;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Serves the ringleader coordinator (WorkerService, JobService) until SIGINT/SIGTERM.\n"
      "  ringleader-coordinator --listen=127.0.0.1:7070 [--http_listen=127.0.0.1:7071] "
      "[--port_file=FILE]");
  absl::ParseCommandLine(argc, argv);
  return ringleader::Run();
}
