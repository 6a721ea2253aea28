// For the gRPC load benchmark: heartbeats of many simulated daemons as independent daemons send
// them, each on its own WorkerService.HeartbeatStream and none waiting for another's answer.
// Driving thread t owns the workers w with w % threads == t and one completion queue; a round
// sends one beat on each of its workers' streams, then collects every answer. (A blocking
// client thread per beat measures the client's thread switches as much as the coordinator.)
//
// Thread-safety: Round(t) and UnaryRound(t) for distinct t may run concurrently; one call per t at a time.
#ifndef RINGLEADER_COORDINATOR_PIPELINED_HEARTBEATS_H_
#define RINGLEADER_COORDINATOR_PIPELINED_HEARTBEATS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {

class PipelinedHeartbeats {
 public:
  // `stubs[w]` carries worker w's stream (not owned; they outlive this); `beats[w]` is what
  // worker w sends. Nothing is opened before the first Round.
  PipelinedHeartbeats(std::vector<v1::WorkerService::Stub*> stubs,
                      std::vector<v1::HeartbeatRequest> beats, int threads,
                      absl::Duration timeout);
  ~PipelinedHeartbeats();  // cancels the streams and drains every queue

  // One beat per worker of thread t, all in flight at once; returns the beats answered.
  // Errors: the first failed stream's status (then the run is over), DEADLINE_EXCEEDED when the
  // answers take longer than `timeout`, FAILED_PRECONDITION for an answer with aborts.
  absl::StatusOr<uint64_t> Round(int t);

  // The same with unary Heartbeat calls, all in flight at once (the baseline of Round).
  absl::StatusOr<uint64_t> UnaryRound(int t);

 private:
  struct Stream;
  struct Lane;  // one driving thread's streams and queue

  std::vector<v1::WorkerService::Stub*> stubs_;
  std::vector<v1::HeartbeatRequest> beats_;
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_PIPELINED_HEARTBEATS_H_
