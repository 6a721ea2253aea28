// A coordinator without its network edges, started from one options struct: the job store, the
// core restored from it, the ranks' per-attempt tokens, the RPC handler with its measurements,
// and the staleness ticker. Plain C++ (no grpc++): the in-process load benchmark drives it as
// it is; CoordinatorServer (coordinator_server.h) puts the gRPC and HTTP edges in front of it.
//
//   CoordinatorInstanceOptions ──Start──> CoordinatorInstance
//     JobStore        the one given (options.store: etcd), else SqliteJobStore under state_dir
//                     (opened first: a second coordinator on the same directory is refused),
//                     else InMemoryJobStore
//     AttemptTokens   when attempt_tokens: attempt_secret, else <state_dir>/attempt_secret
//                     (created on first use), else a fresh secret in memory
//     Coordinator     restored from the store's saved jobs (Coordinator::Restore)
//     RpcHandler      over the Coordinator, counted in rpc_stats()
//     ticker          a thread calling Coordinator::CheckStaleness every check_every
//     saver           a thread saving again the jobs whose save failed, every retry_saves_every
//
// Thread-safety: Start, Shutdown and the destructor from one thread (the owner's); the
// Coordinator and the RpcHandler are thread-safe (their headers), rpc_stats() is read any time.
#ifndef RINGLEADER_COORDINATOR_SERVER_COORDINATOR_INSTANCE_H_
#define RINGLEADER_COORDINATOR_SERVER_COORDINATOR_INSTANCE_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/attempt_tokens.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/options.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/rpc_stats.h"
#include "coordinator/store/job_store.h"

namespace ringleader {

struct CoordinatorInstanceOptions {
  // The core's settings. Its attempt_tokens is set by Start (the instance's own, or nullptr):
  // a value given here is not used.
  CoordinatorOptions coordinator;
  // Directory of the durable job store (coordinator.db, store/sqlite_job_store.h) and of the
  // attempt secret. "" = jobs are kept in memory only and lost when the instance stops.
  std::string state_dir;
  // The job store to use instead of one under state_dir (e.g. an EtcdJobStore whose writes are
  // fenced on the leader's term); shared with the instance from Start on. nullptr = state_dir's.
  std::shared_ptr<JobStore> store;
  // Mint a token per attempt into every Assignment, for the gRPC edge to check
  // (core/attempt_tokens.h). Off = no token minted, none checked.
  bool attempt_tokens = false;
  // The tokens' secret. "" = loaded from <state_dir>/attempt_secret (created there on first
  // use: the same tokens after a restart), or a fresh one in memory without a state_dir.
  std::string attempt_secret;
  // The core's clock (not owned; outlives the instance).
  Clock* clock = Clock::Real();
  // The core's event log (job transitions, workers registered and lost), also given the
  // instance's own lines ("job store: PATH"). nullptr = nowhere.
  Coordinator::EventLogger log;
  // How often the ticker calls Coordinator::CheckStaleness: bounds how late a lease expiry or a
  // long-poll deadline is noticed. Zero = no ticker (the caller calls CheckStaleness).
  absl::Duration check_every = absl::Milliseconds(100);
  // How often the saver retries failed saves (Coordinator::RetryUnsavedSaves), off the ticker's
  // thread since the store may take its whole timeout. Zero = never.
  absl::Duration retry_saves_every = absl::Milliseconds(500);
};

// The part of a coordinator whose start failed, for a caller that words the error in its own
// terms (main.cc names its flags). The error itself is the status Start returns.
enum class CoordinatorPart {
  kJobStore,       // SqliteJobStore::Open (e.g. FAILED_PRECONDITION: the directory is in use)
  kAttemptSecret,  // AttemptTokens::LoadOrCreateSecret
  kRestore,        // JobStore::LoadAll or Coordinator::Restore
  kGrpcServer,     // GrpcServer::Start (coordinator_server.h)
  kHttpServer,     // the /metrics and dashboard routes or HttpServer::Start (idem)
};

class CoordinatorInstance {
 public:
  // Opens the store, restores the core from it and starts the ticker. On error nothing is left
  // running; `failed` (optional) names the part. Errors: those of the part (above).
  static absl::StatusOr<std::unique_ptr<CoordinatorInstance>> Start(
      CoordinatorInstanceOptions options, CoordinatorPart* failed = nullptr);

  ~CoordinatorInstance();  // Shutdown()
  CoordinatorInstance(const CoordinatorInstance&) = delete;
  CoordinatorInstance& operator=(const CoordinatorInstance&) = delete;

  Coordinator& coordinator() { return *coordinator_; }
  // The handler every gRPC call goes through; its calls are counted in rpc_stats().
  RpcHandler& handler() { return *handler_; }
  const RpcStats& rpc_stats() const { return rpc_stats_; }
  // The ranks' per-attempt tokens; nullptr when options.attempt_tokens is off.
  const AttemptTokens* attempt_tokens() const { return attempt_tokens_.get(); }

  // Stops the ticker, then shuts the core down: parked long polls are answered UNAVAILABLE and
  // new calls refused (Coordinator::Shutdown). Idempotent.
  void Shutdown();

 private:
  CoordinatorInstance() = default;

  std::shared_ptr<JobStore> store_;
  std::unique_ptr<AttemptTokens> attempt_tokens_;
  std::unique_ptr<Coordinator> coordinator_;
  RpcStats rpc_stats_;
  std::unique_ptr<RpcHandler> handler_;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  std::thread saver_;
  bool shut_down_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_SERVER_COORDINATOR_INSTANCE_H_
