#include "coordinator/ha/fenced_kv.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

void LeaderFence::Lose(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.empty()) return;
    lost_ = reason.empty() ? "the leadership term ended" : reason;
  }
  if (on_lost_) on_lost_(reason);
}

std::string LeaderFence::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

absl::Status FencedEtcdKv::Refused() const {
  return absl::UnavailableError(absl::StrCat(
      "this coordinator no longer leads (", fence_->lost(),
      "): the write was refused; the new leader has the job state (retry there)"));
}

absl::StatusOr<int64_t> FencedEtcdKv::Put(const std::string& key, const std::string& value) {
  etcd::TxnRequest txn;
  txn.success.push_back(etcd::Op::Put(key, value));
  absl::StatusOr<etcd::TxnResult> done = Txn(txn);
  if (!done.ok()) return done.status();
  return done->revision;
}

absl::StatusOr<int64_t> FencedEtcdKv::DeleteRange(const std::string& key,
                                                  const std::string& range_end) {
  etcd::TxnRequest txn;
  etcd::Op del = etcd::Op::Delete(key);
  del.range_end = range_end;
  txn.success.push_back(std::move(del));
  absl::StatusOr<etcd::TxnResult> done = Txn(txn);
  if (!done.ok()) return done.status();
  // The count of deleted keys is not reported through a transaction's success branch here.
  return 0;
}

absl::StatusOr<etcd::TxnResult> FencedEtcdKv::Txn(const etcd::TxnRequest& request) {
  if (!fence_->lost().empty()) return Refused();
  etcd::TxnRequest fenced = request;
  fenced.compare.push_back(etcd::Compare::CreatedAt(fence_->key(), fence_->revision()));
  // On failure, read the leader key too, to tell a lost term from the caller's own compares.
  fenced.failure.push_back(etcd::Op::Get(fence_->key()));
  absl::StatusOr<etcd::TxnResult> result = kv_->Txn(fenced);
  if (!result.ok() || result->succeeded) return result;
  if (result->gets.empty()) {
    return absl::InternalError("etcd answered a failed transaction without its reads");
  }
  const etcd::RangeResult leader = std::move(result->gets.back());
  result->gets.pop_back();
  if (leader.kvs.empty() || leader.kvs[0].create_revision != fence_->revision()) {
    fence_->Lose(leader.kvs.empty()
                     ? absl::StrCat("the leader key ", fence_->key(), " is gone: the lease expired")
                     : absl::StrCat("the leader key is now held by ", leader.kvs[0].value));
    return Refused();
  }
  return result;
}

}  // namespace ringleader
