// A coordinator among several sharing one etcd (--store=etcd): one leads and serves; the others
// are standbys that answer every call with the leader's address, and one of them takes over
// within seconds when the leader is lost. What ringleader-coordinator runs with --store=etcd.
//
//   Start: etcd answers? ─no─> error naming the endpoints
//            │
//            v        elected (LeaderElection.Step)
//        STANDBY ───────────────────────────────────> LEADER
//     GrpcServer::StartStandby                       CoordinatorServer: the core restored from
//     (UNAVAILABLE + the leader's                    etcd (EtcdJobStore over the term's fenced
//     address), /metrics (leader 0)                  EtcdKv), the attempt secret from etcd
//            ^                                            │
//            └──── deposed: a refused (fenced) write, ────┘
//                  the lease gone or not renewed in time
//
// Both roles listen on the same gRPC and HTTP ports (bound at Start; the role's servers are
// swapped). Running jobs carry across a change of leader by the coordinator restart path they
// already have: the new leader restores RUNNING jobs as awaiting re-attach (coordinator_grace)
// and the daemons, following the leader (common/coordinator_addresses.h), re-attach their ranks.
// A leader that steps down drops its in-memory state: if it leads again it restores from etcd.
//
// Thread-safety: Start, Shutdown and the destructor from one thread; the getters from any.
#ifndef RINGLEADER_COORDINATOR_SERVER_HA_COORDINATOR_H_
#define RINGLEADER_COORDINATOR_SERVER_HA_COORDINATOR_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/ha/leader_election.h"
#include "coordinator/http/http_server.h"
#include "coordinator/rpc/grpc_server.h"
#include "coordinator/rpc/rpc_stats.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/store/etcd/etcd_job_store.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"

namespace ringleader {

struct HaCoordinatorOptions {
  // The leader's servers and core (its instance.store and attempt_secret are set per term;
  // instance.state_dir is not used). listen/http_listen are bound once, at Start.
  CoordinatorServerOptions server;
  // The etcd cluster (endpoints, per-call timeout).
  etcd::EtcdKvGrpcOptions etcd;
  // The key prefix (jobs, archive, leader key "<prefix>leader", secret "<prefix>attempt_secret").
  EtcdJobStoreOptions store;
  // This coordinator's address as clients dial it (the leader key's value). "" = the bound gRPC
  // address (fine when listening on a specific address; give it with 0.0.0.0).
  std::string advertise;
  // The leader's lease: a lost leader is replaced this long after its last renewal at most.
  absl::Duration lease_ttl = absl::Seconds(3);
  // How often a standby reads the leader key.
  absl::Duration poll_every = absl::Milliseconds(100);
  // How long a leader stepping down lets its in-flight calls run.
  absl::Duration step_down_grace = absl::Seconds(1);
};

class HaCoordinator {
 public:
  // Connects to etcd (errors: UNAVAILABLE naming every endpoint when none answers; `failed` =
  // kJobStore), binds the ports as a standby (errors: the servers', `failed` names the part)
  // and starts campaigning; returns without waiting for the outcome.
  static absl::StatusOr<std::unique_ptr<HaCoordinator>> Start(HaCoordinatorOptions options,
                                                               CoordinatorPart* failed = nullptr);
  ~HaCoordinator();  // Shutdown(a past deadline)
  HaCoordinator(const HaCoordinator&) = delete;
  HaCoordinator& operator=(const HaCoordinator&) = delete;

  // The bound gRPC "host:port"; the bound HTTP one ("" without --http_listen).
  const std::string& address() const { return address_; }
  const std::string& http_address() const { return http_address_; }
  const std::string& advertise() const { return advertise_; }
  bool leading() const;
  // The leader's address as last seen ("" unknown).
  std::string leader() const { return election_->leader(); }
  int64_t terms_won() const { return election_->terms_won(); }
  // Blocks until this coordinator leads or `deadline` passes (wall time); whether it leads.
  bool AwaitLeading(absl::Time deadline) const;

  // Stops campaigning; a leader resigns (a standby takes over at its next poll instead of
  // after the TTL) and shuts its server down, in-flight calls running until `deadline`.
  // Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  HaCoordinator() = default;
  void Run();
  // Role changes, on the election thread.
  void BecomeLeader();
  void StepDown(const std::string& reason);
  absl::Status StartStandbyServers();
  void StopStandbyServers();
  std::string MetricsText() const;
  void Log(const std::string& line) const;

  HaCoordinatorOptions options_;
  std::string address_;       // bound gRPC address (listen with its port)
  std::string http_address_;  // bound HTTP address
  std::string advertise_;
  RpcStats etcd_stats_;
  std::shared_ptr<etcd::EtcdKv> kv_;  // measured; shared with the terms' fenced stores
  std::unique_ptr<LeaderElection> election_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  int64_t leader_changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_leader_ ABSL_GUARDED_BY(mu_);
  std::string no_leader_reason_ ABSL_GUARDED_BY(mu_);  // the election's last etcd error
  std::unique_ptr<CoordinatorServer> leader_server_ ABSL_GUARDED_BY(mu_);
  // Election thread only (and Start/Shutdown once it is joined).
  std::unique_ptr<GrpcServer> standby_grpc_;
  std::unique_ptr<HttpServer> standby_http_;
  bool shut_down_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_SERVER_HA_COORDINATOR_H_
