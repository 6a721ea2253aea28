// For the gRPC load benchmark: heartbeats of many simulated daemons as independent daemons send
// them: every worker has one beat in flight at all times and sends its next one as soon as the
// previous one is answered, none waiting for another's answer. (A blocking client thread per
// beat measures the client's thread switches as much as the coordinator.)
//
// Driving thread t owns the workers w with w % threads == t and one completion queue per mode:
// streamed (each worker on its own WorkerService.HeartbeatStream, a write and a read per beat)
// or unary (a Heartbeat call per beat). Beats still in flight when the driver is destroyed are
// cancelled and drained.
//
// Thread-safety: Beats(t, ...) for distinct t may run concurrently; one call per t at a time.
#ifndef RINGLEADER_COORDINATOR_BENCH_PIPELINED_HEARTBEATS_H_
#define RINGLEADER_COORDINATOR_BENCH_PIPELINED_HEARTBEATS_H_

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
  enum class Mode { kStreamed, kUnary };

  // `stubs[w]` carries worker w's beats (not owned; they outlive this); `beats[w]` is what
  // worker w sends; `timeout` bounds the wait for any one answer. Nothing is sent before the
  // first Beats call.
  PipelinedHeartbeats(Mode mode, std::vector<v1::WorkerService::Stub*> stubs,
                      std::vector<v1::HeartbeatRequest> beats, int threads,
                      absl::Duration timeout);
  ~PipelinedHeartbeats();

  // Waits for the next `answers` answers to thread t's workers, sending each worker's next beat
  // as its answer arrives; returns the answers counted.
  // Errors: UNAVAILABLE (a beat failed: the run is over), DEADLINE_EXCEEDED (no answer within
  // `timeout`), FAILED_PRECONDITION (an answer with aborts).
  absl::StatusOr<uint64_t> Beats(int t, uint64_t answers);

 private:
  struct Worker;
  struct Lane;

  absl::Status Send(Lane& lane, Worker& worker);

  const Mode mode_;
  std::vector<v1::WorkerService::Stub*> stubs_;
  std::vector<v1::HeartbeatRequest> beats_;
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_BENCH_PIPELINED_HEARTBEATS_H_
