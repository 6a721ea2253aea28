#include "coordinator/server/ha_coordinator.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/ha/fenced_kv.h"
#include "coordinator/ha/measured_kv.h"
#include "coordinator/ha/term_secret.h"
#include "coordinator/http/ha_metrics_text.h"
#include "coordinator/store/etcd/etcd_import.h"

namespace ringleader {
namespace {

// "0.0.0.0:7070" → "<hostname>:7070": clients cannot dial a wildcard address.
std::string Dialable(const std::string& address) {
  const size_t colon = address.rfind(':');
  const std::string host = address.substr(0, colon);
  if (host != "0.0.0.0" && host != "[::]" && host != "::" && !host.empty()) return address;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return address;
  return absl::StrCat(name, address.substr(colon));
}

// How long one watch of the leader key lasts (then the standby reads the key again): also how
// long a standby's Shutdown may wait for it.
constexpr absl::Duration kWatchFor = absl::Milliseconds(500);

}  // namespace

absl::StatusOr<std::unique_ptr<HaCoordinator>> HaCoordinator::Start(HaCoordinatorOptions options,
                                                                     CoordinatorPart* failed) {
  auto fail = [failed](CoordinatorPart part, absl::Status status) {
    if (failed != nullptr) *failed = part;
    return status;
  };
  std::unique_ptr<HaCoordinator> ha(new HaCoordinator());
  ha->options_ = std::move(options);
  absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(ha->options_.etcd);
  if (!kv.ok()) return fail(CoordinatorPart::kJobStore, kv.status());
  ha->kv_ = std::make_shared<MeasuredEtcdKv>(std::move(*kv), &ha->etcd_stats_);
  const std::string leader_key = ha->options_.store.prefix + "leader";
  {
    etcd::RangeRequest probe;
    probe.key = leader_key;
    absl::StatusOr<etcd::RangeResult> read = ha->kv_->Range(probe);
    if (!read.ok()) {
      return fail(CoordinatorPart::kJobStore,
                  absl::Status(read.status().code(),
                               absl::StrCat("etcd does not answer at start-up: ",
                                            read.status().message(),
                                            ": is etcd running, and are --etcd_endpoints right?")));
    }
  }
  if (absl::Status started = ha->StartStandbyServers(); !started.ok()) {
    return fail(CoordinatorPart::kGrpcServer, started);
  }
  // Every later role binds the ports the first one got.
  ha->options_.server.listen = ha->address_;
  if (!ha->http_address_.empty()) ha->options_.server.http_listen = ha->http_address_;
  ha->advertise_ = ha->options_.advertise.empty() ? Dialable(ha->address_) : ha->options_.advertise;

  LeaderElectionOptions election;
  election.key = leader_key;
  election.self = ha->advertise_;
  election.lease_ttl = ha->options_.lease_ttl;
  election.poll_every = ha->options_.poll_every;
  HaCoordinator* raw = ha.get();
  election.wake = [raw] {
    absl::MutexLock lock(&raw->mu_);
    raw->wake_ = true;
  };
  ha->election_ = std::make_unique<LeaderElection>(ha->kv_, ha->options_.server.instance.clock,
                                                   std::move(election));
  ha->Log(absl::StrCat("standby at ", ha->advertise_, ", campaigning on ", leader_key, " in ",
                       ha->kv_->Describe(), " (lease ",
                       absl::FormatDuration(ha->options_.lease_ttl), ")"));
  ha->thread_ = std::thread([raw] { raw->Run(); });
  return ha;
}

HaCoordinator::~HaCoordinator() { Shutdown(absl::UnixEpoch()); }

void HaCoordinator::Log(const std::string& line) const {
  const CoordinatorInstanceOptions& instance = options_.server.instance;
  if (instance.log) instance.log(instance.clock->Now(), line);
}

bool HaCoordinator::leading() const {
  absl::MutexLock lock(&mu_);
  return leader_server_ != nullptr;
}

bool HaCoordinator::AwaitLeading(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto leads = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return leader_server_ != nullptr; };
  mu_.AwaitWithDeadline(absl::Condition(&leads), deadline);
  return leader_server_ != nullptr;
}

std::string HaCoordinator::MetricsText() const {
  HaMetrics metrics;
  {
    absl::MutexLock lock(&mu_);
    metrics.leading = leader_server_ != nullptr;
    metrics.leader_changes = leader_changes_;
  }
  metrics.terms_won = election_ != nullptr ? election_->terms_won() : 0;
  metrics.etcd_calls = etcd_stats_.Take();
  return HaMetricsText(metrics);
}

absl::Status HaCoordinator::StartStandbyServers() {
  auto standby = std::make_unique<StandbyService>(
      advertise_.empty() ? options_.server.listen : advertise_,
      [this] {
        absl::MutexLock lock(&mu_);
        return last_leader_;
      },
      [this] {
        absl::MutexLock lock(&mu_);
        return no_leader_reason_;
      });
  std::shared_ptr<grpc::ServerCredentials> credentials =
      options_.server.credentials != nullptr ? options_.server.credentials
                                             : grpc::InsecureServerCredentials();
  absl::StatusOr<std::unique_ptr<GrpcServer>> grpc_server =
      GrpcServer::StartStandby(options_.server.listen, credentials, std::move(standby));
  if (!grpc_server.ok()) return grpc_server.status();
  standby_grpc_ = std::move(*grpc_server);
  address_ = standby_grpc_->address();
  if (!options_.server.http_listen.empty()) {
    HttpRouter router;
    absl::Status routed = AddMetricsRoute(&router, [this] { return MetricsText(); });
    if (!routed.ok()) return routed;
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(options_.server.http_listen, std::move(router));
    if (!http.ok()) return http.status();
    standby_http_ = std::move(*http);
    http_address_ = standby_http_->address();
  }
  return absl::OkStatus();
}

void HaCoordinator::StopStandbyServers() {
  if (standby_grpc_ != nullptr) standby_grpc_->Shutdown(absl::UnixEpoch());
  standby_grpc_.reset();
  if (standby_http_ != nullptr) standby_http_->Stop();
  standby_http_.reset();
}

void HaCoordinator::Run() {
  std::string last_known;  // the last non-empty leader seen
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      wake_ = false;
    }
    const LeaderElection::Outcome outcome = election_->Step();
    if (outcome.change == LeaderElection::Change::kElected) BecomeLeader();
    if (outcome.change == LeaderElection::Change::kDeposed) StepDown(outcome.reason);
    const std::string leader = election_->leader();
    const absl::Status error = election_->last_error();
    {
      absl::MutexLock lock(&mu_);
      last_leader_ = leader;
      no_leader_reason_ = error.ok() ? "" : absl::StrCat("this coordinator cannot read the "
                                                         "leader key: ", error.message());
      if (!leader.empty() && leader != last_known) {
        if (!last_known.empty()) ++leader_changes_;
        last_known = leader;
      }
    }
    // A standby that knows the leader waits on the leader key (etcd's Watch): it campaigns the
    // moment the key goes. Otherwise, or when the watch fails, it polls.
    if (!election_->leading() && election_->AwaitLeaderChange(kWatchFor).ok()) continue;
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), election_->next_step_in());
  }
}

void HaCoordinator::BecomeLeader() {
  const std::shared_ptr<LeaderFence> fence = election_->fence();
  if (fence == nullptr) return;
  Log(absl::StrCat("elected leader (", advertise_, ", term of revision ", fence->revision(),
                   "): loading the job state from ", kv_->Describe()));
  CoordinatorServerOptions server = options_.server;
  auto refuse = [this](const std::string& what, const absl::Status& status) {
    Log(absl::StrCat("cannot lead: ", what, ": ", status.ToString(), "; resigning"));
    election_->Resign().IgnoreError();
  };
  if (server.instance.attempt_tokens && server.instance.attempt_secret.empty()) {
    FencedEtcdKv fenced(kv_, fence);
    absl::StatusOr<std::string> secret =
        LoadOrCreateEtcdSecret(fenced, AttemptSecretKey(options_.store));
    if (!secret.ok()) return refuse("the attempt secret", secret.status());
    server.instance.attempt_secret = *std::move(secret);
  }
  absl::StatusOr<std::unique_ptr<EtcdJobStore>> store =
      EtcdJobStore::Create(std::make_unique<FencedEtcdKv>(kv_, fence), options_.store);
  if (!store.ok()) return refuse("the job store", store.status());
  server.instance.store = std::move(*store);
  server.extra_metrics = [this] { return MetricsText(); };
  StopStandbyServers();
  CoordinatorPart part = CoordinatorPart::kRestore;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> started =
      CoordinatorServer::Start(std::move(server), &part);
  if (!started.ok()) {
    refuse("starting the coordinator", started.status());
    if (absl::Status standby = StartStandbyServers(); !standby.ok()) {
      Log(absl::StrCat("cannot serve as a standby either: ", standby.ToString()));
    }
    return;
  }
  Log(absl::StrCat("leading: serving on ", address_));
  absl::MutexLock lock(&mu_);
  leader_server_ = std::move(*started);
}

void HaCoordinator::StepDown(const std::string& reason) {
  Log(absl::StrCat("stepping down: ", reason, "; answering as a standby"));
  std::unique_ptr<CoordinatorServer> server;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(leader_server_);
  }
  if (server != nullptr) {
    server->Shutdown(absl::Now() + options_.step_down_grace);
    server.reset();
  }
  if (absl::Status standby = StartStandbyServers(); !standby.ok()) {
    Log(absl::StrCat("cannot serve as a standby: ", standby.ToString()));
  }
}

void HaCoordinator::Shutdown(absl::Time deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  std::unique_ptr<CoordinatorServer> server;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(leader_server_);
  }
  // The server first (no write after it), then the term: a standby takes over at its next poll.
  if (server != nullptr) server->Shutdown(deadline);
  if (election_ != nullptr && election_->leading()) {
    if (absl::Status resigned = election_->Resign(); !resigned.ok()) {
      Log(absl::StrCat("could not resign (a standby takes over when the lease runs out): ",
                       resigned.ToString()));
    } else {
      Log("resigned the leadership");
    }
  }
  server.reset();
  StopStandbyServers();
}

}  // namespace ringleader
