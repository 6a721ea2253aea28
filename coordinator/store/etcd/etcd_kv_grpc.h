// EtcdKv over etcd's v3 gRPC API (proto/etcd/rpc.proto), plaintext, to one or more endpoints of
// one etcd cluster. Each call has its own deadline; a call that finds its endpoint UNAVAILABLE
// (refused, down, no leader) or out of time tries the next endpoint, and the one that answered
// is tried first next time. A write retried on another endpoint may have been applied by the
// first: callers make writes idempotent or conditional (a Txn compare), as EtcdJobStore does.
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_GRPC_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_GRPC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/etcd/etcd_kv.h"
#include "grpcpp/channel.h"
#include "proto/etcd/rpc.grpc.pb.h"

namespace ringleader::etcd {

struct EtcdKvGrpcOptions {
  // "http://host:port" or "host:port"; at least one. (https is not supported yet.)
  std::vector<std::string> endpoints;
  // Per call and endpoint.
  absl::Duration call_timeout = absl::Seconds(5);
};

class EtcdKvGrpc : public EtcdKv {
 public:
  // Errors: INVALID_ARGUMENT (no endpoint, or one that is not http://host:port). Connects
  // lazily: an unreachable cluster shows in the first call.
  static absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> Create(const EtcdKvGrpcOptions& options);

  absl::StatusOr<RangeResult> Range(const RangeRequest& request) override;
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value) override;
  absl::StatusOr<int64_t> DeleteRange(const std::string& key,
                                      const std::string& range_end) override;
  absl::StatusOr<TxnResult> Txn(const TxnRequest& request) override;
  std::string Describe() const override;
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl) override;  // ttl rounded up to seconds
  absl::StatusOr<absl::Duration> LeaseKeepAlive(int64_t id) override;
  absl::Status LeaseRevoke(int64_t id) override;
  // On the endpoint that answered last; another endpoint is not tried (the caller reads again).
  absl::StatusOr<bool> AwaitChange(const std::string& key, int64_t after_revision,
                                   absl::Duration timeout) override;

 private:
  struct Endpoint {
    std::string name;  // as given
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  EtcdKvGrpc(std::vector<Endpoint> endpoints, absl::Duration call_timeout);

  // Runs `call` against each endpoint in turn, starting with the last one that answered, until
  // one answers with anything but UNAVAILABLE or DEADLINE_EXCEEDED. `what` names the request
  // (its keys) in errors.
  template <typename Call>
  absl::Status CallAny(const std::string& what, Call call);

  std::vector<Endpoint> endpoints_;
  const absl::Duration call_timeout_;
  absl::Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader::etcd

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_GRPC_H_
