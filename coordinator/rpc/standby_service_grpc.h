// What a standby coordinator answers. With several coordinators on one etcd, one is the leader;
// the others are standbys, and a standby's standby mode registers this generic service in place
// of the real WorkerService and JobService (it has no core to serve them from).
//
// Every call to a /ringleader.v1.WorkerService/ or /ringleader.v1.JobService/ method, unary or
// streaming (HeartbeatStream), is finished at once, before any message is read, with
//   - UNAVAILABLE and "coordinator SELF is a standby; the leader is LEADER (retry there)", or
//     "coordinator SELF is a standby; no leader is elected yet (...)" while none is known;
//   - trailing metadata kLeaderMetadataKey ("ringleader-leader") = LEADER, absent while none
//     is known.
// The call was not executed: clients (common/coordinator_addresses.h) send it again to the
// leader, non-idempotent calls included. Any other method answers UNIMPLEMENTED. Services
// registered on the same server (health, reflection) are served as usual: a generic service
// only receives the methods no other service registered.
//
// Thread-safe: `leader` may be called from any gRPC thread, concurrently.
#ifndef RINGLEADER_COORDINATOR_RPC_STANDBY_SERVICE_GRPC_H_
#define RINGLEADER_COORDINATOR_RPC_STANDBY_SERVICE_GRPC_H_

#include <functional>
#include <string>

#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

class StandbyService : public grpc::CallbackGenericService {
 public:
  // `self`: this coordinator's advertised "host:port" (for the message). `leader`: the current
  // leader's "host:port", or "" while no leader is known.
  // `why_no_leader` (optional): why no leader is known, appended to that refusal (e.g. etcd
  // cannot be reached).
  StandbyService(std::string self, std::function<std::string()> leader,
                 std::function<std::string()> why_no_leader = nullptr);

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

  // The status a standby answers now for `method` ("/package.Service/Method"), adding the
  // leader's metadata to `context` when there is a leader (`context` may be null).
  grpc::Status Refusal(const std::string& method, grpc::GenericCallbackServerContext* context);

 private:
  const std::string self_;
  const std::function<std::string()> leader_;
  const std::function<std::string()> why_no_leader_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_STANDBY_SERVICE_GRPC_H_
