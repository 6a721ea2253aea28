#include "coordinator/ha/measured_kv.h"

#include "absl/time/clock.h"

namespace ringleader {
namespace {

absl::StatusCode CodeOf(const absl::Status& status) { return status.code(); }
template <typename T>
absl::StatusCode CodeOf(const absl::StatusOr<T>& result) {
  return result.status().code();
}

}  // namespace

template <typename Call>
auto MeasuredEtcdKv::Timed(const char* name, Call call) -> decltype(call()) {
  // Real elapsed time: this measures etcd, not the coordinator's (possibly fake) clock.
  const absl::Time start = absl::Now();
  auto result = call();
  stats_->Record(name, CodeOf(result), absl::Now() - start);
  return result;
}

absl::StatusOr<etcd::RangeResult> MeasuredEtcdKv::Range(const etcd::RangeRequest& request) {
  return Timed("Range", [&] { return kv_->Range(request); });
}

absl::StatusOr<int64_t> MeasuredEtcdKv::Put(const std::string& key, const std::string& value) {
  return Timed("Put", [&] { return kv_->Put(key, value); });
}

absl::StatusOr<int64_t> MeasuredEtcdKv::DeleteRange(const std::string& key,
                                                    const std::string& range_end) {
  return Timed("DeleteRange", [&] { return kv_->DeleteRange(key, range_end); });
}

absl::StatusOr<etcd::TxnResult> MeasuredEtcdKv::Txn(const etcd::TxnRequest& request) {
  return Timed("Txn", [&] { return kv_->Txn(request); });
}

absl::StatusOr<int64_t> MeasuredEtcdKv::LeaseGrant(absl::Duration ttl) {
  return Timed("LeaseGrant", [&] { return kv_->LeaseGrant(ttl); });
}

absl::StatusOr<absl::Duration> MeasuredEtcdKv::LeaseKeepAlive(int64_t id) {
  return Timed("LeaseKeepAlive", [&] { return kv_->LeaseKeepAlive(id); });
}

absl::Status MeasuredEtcdKv::LeaseRevoke(int64_t id) {
  return Timed("LeaseRevoke", [&] { return kv_->LeaseRevoke(id); });
}

}  // namespace ringleader
