// Server side of WorkerService.HeartbeatStream: one long-lived bidirectional stream per daemon
// on which every HeartbeatStreamRequest renews a lease through RpcHandler::Heartbeat (the same
// code, statistics and errors as the unary Heartbeat) and is answered by one response.
//
// Why: a unary call costs gRPC a call set-up, a deadline, metadata and several thread hand-offs
// on both sides; a beat on an open stream is one message each way.
//
// One stream, one beat at a time (the client waits for each answer before the next):
//
//   open ──StartRead──> READING ──beat──> handler ──ok──> WRITING ──written──> READING
//                          │                 └──error──> Finish(error)  (the client reopens)
//                          ├──client closed (half-close)─────> Finish(OK)
//                          └──cancelled (CloseAll, client gone)──> Finish(CANCELLED)
//
// CloseAll() (the server is about to shut down) cancels every open stream at once, so they do
// not hold grpc::Server::Shutdown up until its deadline; a stream opened after it ends at once
// with UNAVAILABLE. The clients fall back to unary Heartbeat, which retries while the
// coordinator restarts.
//
// Thread-safety: thread-safe. Reactors run on gRPC's callback threads; only one reactor
// operation of a stream is pending at a time, so Finish is called exactly once per stream.
#ifndef RINGLEADER_COORDINATOR_RPC_HEARTBEAT_STREAMS_H_
#define RINGLEADER_COORDINATOR_RPC_HEARTBEAT_STREAMS_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/rpc_handler.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {

class HeartbeatStreams {
 public:
  using Reactor =
      grpc::ServerBidiReactor<v1::HeartbeatStreamRequest, v1::HeartbeatStreamResponse>;

  // Does not own `handler`, which must outlive every stream.
  explicit HeartbeatStreams(RpcHandler* handler) : handler_(handler) {}
  HeartbeatStreams(const HeartbeatStreams&) = delete;
  HeartbeatStreams& operator=(const HeartbeatStreams&) = delete;

  // The reactor of a new stream (gRPC owns it; it deletes itself when the stream is done).
  Reactor* Open(grpc::CallbackServerContext* context);

  // Cancels every open stream; later streams end at once with UNAVAILABLE. Idempotent.
  void CloseAll();

  // Streams open now.
  size_t open_streams() const;

 private:
  class Stream;
  friend class Stream;
  // Called by a stream when gRPC is done with it (OnDone), before it deletes itself.
  void Remove(Stream* stream);

  RpcHandler* const handler_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<Stream*> open_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_HEARTBEAT_STREAMS_H_
