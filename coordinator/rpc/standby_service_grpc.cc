#include "coordinator/rpc/standby_service_grpc.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/coordinator_addresses.h"

namespace ringleader {
namespace {

constexpr const char* kRefusedServices[] = {
    "/ringleader.v1.WorkerService/",
    "/ringleader.v1.JobService/",
};

// Finishes the call with `status` as soon as it starts; reads and writes nothing.
class RefusingReactor : public grpc::ServerGenericBidiReactor {
 public:
  explicit RefusingReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

StandbyService::StandbyService(std::string self, std::function<std::string()> leader,
                               std::function<std::string()> why_no_leader)
    : self_(std::move(self)), leader_(std::move(leader)), why_no_leader_(std::move(why_no_leader)) {}

grpc::Status StandbyService::Refusal(const std::string& method,
                                     grpc::GenericCallbackServerContext* context) {
  bool refused = false;
  for (const char* service : kRefusedServices) refused |= absl::StartsWith(method, service);
  if (!refused) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("coordinator ", self_, " is a standby; ", method,
                                     " is not a ringleader.v1 WorkerService or JobService method"));
  }
  const std::string leader = leader_ ? leader_() : "";
  if (leader.empty()) {
    const std::string why = why_no_leader_ ? why_no_leader_() : "";
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("coordinator ", self_,
                     " is a standby; no leader is elected yet (retry shortly, or another "
                     "coordinator of the list)",
                     why.empty() ? "" : absl::StrCat(": ", why)));
  }
  if (context != nullptr) context->AddTrailingMetadata(kLeaderMetadataKey, leader);
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("coordinator ", self_, " is a standby; the leader is ", leader,
                                   " (retry there)"));
}

grpc::ServerGenericBidiReactor* StandbyService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  return new RefusingReactor(Refusal(context->method(), context));
}

}  // namespace ringleader
