// `CoordinatorClient` over gRPC: the only worker-side code that links grpc++.
//
// Deadlines: every call gets one. Non-blocking RPCs get `call_timeout`; the long polls
// (WaitAssignment, KvGet, KvGetMany) get their request's wait_timeout_ms plus
// `long_poll_margin`, so the coordinator always answers before the transport gives up.
//
// Retries: a call that fails with UNAVAILABLE (the coordinator unreachable or restarting) is
// retried with capped exponential backoff ONLY when repeating it cannot change the outcome:
//
//   retried (idempotent)      why repeating is harmless
//   RegisterWorker            same name + incarnation: the repeat replaces the first registration
//                             before the worker has any attempt
//   Heartbeat                 renews a lease
//   WaitAssignment            a poll; an assignment not delivered stays pending for the worker
//   JoinJob                   asserts "rank r joined with fingerprint f" again
//   KvSet / KvGet / KvGetMany overwrite the same value / read
//   FinishRank                the coordinator keeps the first report of a rank
//   NOT retried               why
//   ReportProgress            a repeat would record the same steps twice; the rank sends the
//                             next batch anyway
//   AppendLogs                harmless to repeat (a retried offset is ignored), but the log
//                             shipper tries the same offset again at its next tick itself, and
//                             must not hold up the daemon's final report while the coordinator
//                             is unreachable
//
// Heartbeats go out on one long-lived stream (WorkerService.HeartbeatStream,
// heartbeat_stream_client.h), a message each way per beat, with `call_timeout` per beat. A
// beat the stream could not carry (the connection broke, the coordinator is restarting or
// shutting down) is sent again as a unary Heartbeat with the retries above, and the next beat
// opens a new stream; a coordinator without the stream (UNIMPLEMENTED) gets unary heartbeats
// from then on. What the coordinator answers (NOT_FOUND) and a beat without an answer in time
// (DEADLINE_EXCEEDED) are returned as from a unary call.
//
// Several coordinators (a leader and standbys, common/coordinator_addresses.h): the address may
// be a list, "host:port[,host:port...]", with one channel per address, created when first
// used. Calls go to the current address of a LeaderTracker. A call answered UNAVAILABLE by a
// standby that names the leader (trailing metadata "ringleader-leader") was not executed: the
// client switches to that leader and sends it again AT ONCE, whether it is idempotent or not (a
// few such hops per call at most, so that coordinators naming each other during an election
// cannot loop; hops beyond that count as attempts). An UNAVAILABLE without a hint (connection
// refused, the coordinator gone) moves to the next address of the list, and the retry rules
// above decide whether and when the call is sent again. The heartbeat stream is always opened
// on the current address. With a single address nothing changes.
//
// Every other code is returned at once. Status conversion (grpc::Status → absl::Status, same
// code, message prefixed with the RPC name) happens in one place, FromGrpcStatus.
//
// Thread-safety: thread-safe; calls may run concurrently. CancelAll() interrupts in-flight calls
// and backoff waits.
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_GRPC_COORDINATOR_CLIENT_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_GRPC_COORDINATOR_CLIENT_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/coordinator_addresses.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"
#include "worker/coordinator_client/coordinator_client.h"
#include "worker/coordinator_client/heartbeat_stream_client.h"

namespace ringleader {

// Capped exponential backoff for idempotent calls that failed with UNAVAILABLE.
// With a list of coordinators the waits are capped at 500 ms and at least 16 attempts are made:
// a failover refuses calls for a few seconds, then the new leader should be found at once.
struct RetryOptions {
  // Attempts in total, the first included (1 = never retry).
  int max_attempts = 8;
  // Wait before the second attempt; each later wait is `multiplier` times longer ...
  absl::Duration initial_backoff = absl::Milliseconds(100);
  double multiplier = 2.0;
  // ... but never longer than this.
  absl::Duration max_backoff = absl::Seconds(2);
  // Each wait is scaled by a random factor in [1 - jitter, 1 + jitter] so that many workers
  // do not retry in lockstep (0 = exact waits).
  double jitter = 0.2;
};

struct GrpcCoordinatorClientOptions {
  // Channel credentials; nullptr = insecure (plaintext) channel.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Deadline of every non-blocking RPC.
  absl::Duration call_timeout = absl::Seconds(10);
  // Added to a long poll's wait_timeout_ms to form its deadline.
  absl::Duration long_poll_margin = absl::Seconds(5);
  RetryOptions retry;
  // Heartbeats over one stream (see above); false = a unary call per heartbeat.
  bool heartbeat_stream = true;
  // Performs one backoff wait. nullptr = wait in real time, cut short by CancelAll(). Tests
  // inject a recorder so they never sleep.
  std::function<void(absl::Duration)> backoff_wait;
};

// grpc::Status → absl::Status with the same code; the message is prefixed with `rpc` ("KvGet:
// ...") so logs say which call failed.
absl::Status FromGrpcStatus(const grpc::Status& status, const char* rpc);

class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  // Builds channels to `address`: "host:port", or a comma-separated list of them (see above;
  // a string ParseCoordinatorAddresses refuses is used whole, as one gRPC target). Never fails:
  // connection errors surface as UNAVAILABLE on the first calls.
  static std::unique_ptr<GrpcCoordinatorClient> Create(const std::string& address,
                                                       GrpcCoordinatorClientOptions options = {});
  // Over an existing channel (tests use an in-process channel). A leader named by a standby
  // gets a channel of its own (`options.credentials`).
  GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                        GrpcCoordinatorClientOptions options);
  // Over `addresses` (not empty), the first current.
  GrpcCoordinatorClient(std::vector<std::string> addresses, GrpcCoordinatorClientOptions options);
  ~GrpcCoordinatorClient() override;

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::StatusOr<v1::WaitAssignmentResponse> WaitAssignment(
      const v1::WaitAssignmentRequest& request) override;
  absl::StatusOr<v1::JoinJobResponse> JoinJob(const v1::JoinJobRequest& request) override;
  absl::StatusOr<v1::KvSetResponse> KvSet(const v1::KvSetRequest& request) override;
  absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request) override;
  absl::StatusOr<v1::KvGetManyResponse> KvGetMany(const v1::KvGetManyRequest& request) override;
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(
      const v1::ReportProgressRequest& request) override;
  absl::StatusOr<v1::FinishRankResponse> FinishRank(
      const v1::FinishRankRequest& request) override;
  absl::StatusOr<v1::AppendLogsResponse> AppendLogs(
      const v1::AppendLogsRequest& request) override;
  void CancelAll() override;
  // The token goes out as "ringleader-attempt-token" metadata on every call whose request
  // names that attempt. Tokens of up to 16 attempts are kept (the oldest are dropped).
  void AddAttemptToken(const std::string& job_id, uint64_t generation,
                       const std::string& token) override;

  // The address calls go to now.
  std::string current_address() const { return tracker_.current(); }

 private:
  using Stub = v1::WorkerService::Stub;
  template <typename Request, typename Response>
  using Method = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

  // Runs `method` with `timeout`, retrying UNAVAILABLE when `idempotent`.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(const char* rpc, Method<Request, Response> method,
                                const Request& request, absl::Duration timeout, bool idempotent);
  // One attempt on the stub of `address`; registers the context so CancelAll() can reach it.
  // `*leader`: the leader named in the answer's trailing metadata, "" when none.
  template <typename Request, typename Response>
  grpc::Status CallOnce(const std::string& address, Method<Request, Response> method,
                        const Request& request, absl::Duration timeout, Response* response,
                        std::string* leader);
  // The stub of `address`, its channel created on first use. Stubs live as long as this.
  Stub* StubFor(const std::string& address);
  absl::Duration LongPollTimeout(uint32_t wait_timeout_ms) const;
  absl::Duration NextBackoff(absl::Duration current) const;
  void BackoffWait(absl::Duration wait);

  const GrpcCoordinatorClientOptions options_;
  LeaderTracker tracker_;
  absl::Mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<Stub>> stubs_ ABSL_GUARDED_BY(stubs_mu_);
  HeartbeatStreamClient heartbeats_{[this] { return StubFor(tracker_.current()); }};
  // Set once the coordinator answered UNIMPLEMENTED to the stream.
  std::atomic<bool> heartbeat_stream_unsupported_{false};
  absl::Notification cancelled_;
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
  // "<job>/<generation>" -> token, oldest first.
  std::deque<std::pair<std::string, std::string>> attempt_tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_GRPC_COORDINATOR_CLIENT_H_
