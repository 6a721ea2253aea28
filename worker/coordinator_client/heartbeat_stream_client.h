// Client side of WorkerService.HeartbeatStream: the beats of one GrpcCoordinatorClient go out
// as messages on one long-lived stream (coordinator/heartbeat_streams.h has the server side).
//
// A beat is a write and a read on the calling thread's own completion queue: no call set-up
// and no hand-off to another thread, and a per-beat deadline without a timer thread.
//
//   CLOSED ──Beat: open──> OPEN ──Beat ok──> OPEN
//     ^                     │
//     └── the beat failed ──┘  (refused by the coordinator, no answer in time, stream broken,
//                              Cancel): the call is cancelled and drained; the next Beat opens
//                              a new stream
//
// With several coordinators (common/coordinator_addresses.h) each new stream is opened on the
// stub the client's provider answers then: the current leader. A stream a standby refused
// reports the leader it named (Beat's `leader`).
//
// Thread-safety: thread-safe. Beats are serialized (one at a time per stream); Cancel may be
// called from any thread and makes the pending and every later Beat return CANCELLED.
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_HEARTBEAT_STREAM_CLIENT_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_HEARTBEAT_STREAM_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {

class HeartbeatStreamClient {
 public:
  // Does not own `stub`, which must outlive this.
  explicit HeartbeatStreamClient(v1::WorkerService::Stub* stub);
  // Opens each stream on the stub `stub` answers at that moment (not owned; every stub it
  // answers must outlive this).
  explicit HeartbeatStreamClient(std::function<v1::WorkerService::Stub*()> stub);
  ~HeartbeatStreamClient();  // cancels and drains an open stream
  HeartbeatStreamClient(const HeartbeatStreamClient&) = delete;
  HeartbeatStreamClient& operator=(const HeartbeatStreamClient&) = delete;

  // Sends `request` on the stream (opening it first when closed) and waits up to `timeout` for
  // its answer. Errors, gRPC's codes (the stream is closed after any of them):
  //   DEADLINE_EXCEEDED  no answer within `timeout`;
  //   CANCELLED          Cancel() was called, or the coordinator cancelled the stream (it is
  //                      shutting down: Cancel tells them apart);
  //   UNIMPLEMENTED      the coordinator has no HeartbeatStream;
  //   UNAVAILABLE        the connection failed or broke;
  //   others             the coordinator refused the beat (Heartbeat's codes: NOT_FOUND).
  // When the stream ended with trailing metadata naming the leader (a standby's refusal, see
  // coordinator/rpc/standby_service_grpc.h), `*leader` (if not null) is set to that leader's
  // "host:port"; otherwise it is cleared.
  grpc::Status Beat(const v1::HeartbeatRequest& request, absl::Duration timeout,
                    v1::HeartbeatResponse* response, std::string* leader = nullptr);

  // Cancels the open stream, if any; the pending and every later Beat return CANCELLED.
  void Cancel();

 private:
  struct Call;

  // Opens call_; on an error call_ is closed again.
  grpc::Status OpenLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_);
  // Waits for the `*pending` operations of call_ until `deadline`, counting `*pending` down;
  // false on a timeout (`*pending` are left then). `*all_ok` is cleared when any failed.
  bool AwaitLocked(int* pending, absl::Time deadline, bool* all_ok)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_);
  // Cancels call_ (when `cancel`), drains its `pending` operations, asks for its final status
  // and frees it. Returns that status; closed_leader_ is the leader its trailers named.
  grpc::Status CloseLocked(int pending, bool cancel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_);
  // Beat's work; `timeout` (for the message) led to `deadline`.
  grpc::Status BeatLocked(const v1::HeartbeatRequest& request, absl::Time deadline,
                          absl::Duration timeout, v1::HeartbeatResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_);

  const std::function<v1::WorkerService::Stub*()> stub_;
  absl::Mutex beat_mu_;  // one beat at a time; guards the call itself
  std::unique_ptr<Call> call_ ABSL_GUARDED_BY(beat_mu_);
  std::string closed_leader_ ABSL_GUARDED_BY(beat_mu_);
  // Cancel's view of the open call: its context, set and cleared by the beating thread.
  absl::Mutex cancel_mu_ ABSL_ACQUIRED_AFTER(beat_mu_);
  grpc::ClientContext* open_context_ ABSL_GUARDED_BY(cancel_mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(cancel_mu_) = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_HEARTBEAT_STREAM_CLIENT_H_
