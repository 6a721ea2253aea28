// An EtcdKv that times every call it forwards, by call and status code, into an RpcStats (the
// ringleader_etcd_call_duration_seconds histogram of /metrics). Thread-safe.
#ifndef RINGLEADER_COORDINATOR_HA_MEASURED_KV_H_
#define RINGLEADER_COORDINATOR_HA_MEASURED_KV_H_

#include <memory>
#include <string>

#include "coordinator/rpc/rpc_stats.h"
#include "coordinator/store/etcd/etcd_kv.h"

namespace ringleader {

class MeasuredEtcdKv : public etcd::EtcdKv {
 public:
  // `stats` outlives this.
  MeasuredEtcdKv(std::unique_ptr<etcd::EtcdKv> kv, RpcStats* stats)
      : kv_(std::move(kv)), stats_(stats) {}

  absl::StatusOr<etcd::RangeResult> Range(const etcd::RangeRequest& request) override;
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value) override;
  absl::StatusOr<int64_t> DeleteRange(const std::string& key,
                                      const std::string& range_end) override;
  absl::StatusOr<etcd::TxnResult> Txn(const etcd::TxnRequest& request) override;
  std::string Describe() const override { return kv_->Describe(); }
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl) override;
  absl::StatusOr<absl::Duration> LeaseKeepAlive(int64_t id) override;
  absl::Status LeaseRevoke(int64_t id) override;

 private:
  template <typename Call>
  auto Timed(const char* name, Call call) -> decltype(call());

  const std::unique_ptr<etcd::EtcdKv> kv_;
  RpcStats* const stats_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HA_MEASURED_KV_H_
