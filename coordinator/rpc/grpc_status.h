// absl::Status → grpc::Status, the one conversion the coordinator's gRPC adapter uses.
#ifndef RINGLEADER_COORDINATOR_RPC_GRPC_STATUS_H_
#define RINGLEADER_COORDINATOR_RPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ringleader {

// Same code (both follow the canonical numbering 0..16), same message.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      std::string(status.message()));
}

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_GRPC_STATUS_H_
