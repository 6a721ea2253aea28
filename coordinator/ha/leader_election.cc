#include "coordinator/ha/leader_election.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

LeaderElection::LeaderElection(std::shared_ptr<etcd::EtcdKv> kv, Clock* clock,
                               LeaderElectionOptions options)
    : kv_(std::move(kv)), clock_(clock), options_(std::move(options)) {}

bool LeaderElection::leading() const {
  absl::MutexLock lock(&mu_);
  return fence_ != nullptr;
}

std::string LeaderElection::leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

std::shared_ptr<LeaderFence> LeaderElection::fence() const {
  absl::MutexLock lock(&mu_);
  return fence_;
}

absl::Status LeaderElection::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

int64_t LeaderElection::terms_won() const {
  absl::MutexLock lock(&mu_);
  return terms_won_;
}

void LeaderElection::SetError(absl::Status error) {
  absl::MutexLock lock(&mu_);
  last_error_ = std::move(error);
}

absl::Duration LeaderElection::next_step_in() const {
  if (!leading()) return options_.poll_every;
  const absl::Duration left = next_renewal_ - clock_->Now();
  return left > absl::ZeroDuration() ? left : absl::ZeroDuration();
}

absl::StatusOr<bool> LeaderElection::AwaitLeaderChange(absl::Duration timeout) {
  if (leading() || seen_at_revision_ == 0) {
    return absl::FailedPreconditionError("no leader seen to wait on");
  }
  return kv_->AwaitChange(options_.key, seen_at_revision_, timeout);
}

LeaderElection::Outcome LeaderElection::Step() {
  return leading() ? StepAsLeader() : StepAsStandby();
}

LeaderElection::Outcome LeaderElection::Depose(const std::string& reason) {
  std::shared_ptr<LeaderFence> fence;
  {
    absl::MutexLock lock(&mu_);
    fence = std::move(fence_);
    fence_ = nullptr;
    leader_.clear();
  }
  if (fence != nullptr) fence->Lose(reason);  // no-op when the fence was lost first
  return Outcome{Change::kDeposed, fence != nullptr && !fence->lost().empty() ? fence->lost()
                                                                              : reason};
}

LeaderElection::Outcome LeaderElection::StepAsLeader() {
  const std::shared_ptr<LeaderFence> fence = this->fence();
  if (const std::string lost = fence->lost(); !lost.empty()) return Depose(lost);
  const absl::Time now = clock_->Now();
  if (now >= next_renewal_) {
    absl::StatusOr<absl::Duration> renewed = kv_->LeaseKeepAlive(lease_);
    if (renewed.ok()) {
      renewed_at_ = now;
      next_renewal_ = now + options_.lease_ttl / 2;
      SetError(absl::OkStatus());
    } else if (absl::IsNotFound(renewed.status())) {
      lease_ = 0;
      return Depose(absl::StrCat("its lease expired in etcd (", renewed.status().message(),
                                 ")"));
    } else {
      SetError(renewed.status());
      next_renewal_ = clock_->Now() + options_.lease_ttl / 10;
    }
  }
  if (clock_->Now() - renewed_at_ >= options_.lease_ttl) {
    // Keep the lease: etcd may still hold it (a cluster without quorum expires nothing).
    return Depose(absl::StrCat("it could not renew its lease within ",
                               absl::FormatDuration(options_.lease_ttl), " (",
                               last_error().ToString(), ")"));
  }
  return Outcome{};
}

LeaderElection::Outcome LeaderElection::Elect(int64_t create_revision, absl::Time renewed_at) {
  renewed_at_ = renewed_at;
  next_renewal_ = renewed_at + options_.lease_ttl / 2;
  auto fence = std::make_shared<LeaderFence>(
      options_.key, create_revision, [wake = options_.wake](const std::string&) {
        if (wake) wake();
      });
  {
    absl::MutexLock lock(&mu_);
    fence_ = fence;
    leader_ = options_.self;
    last_error_ = absl::OkStatus();
    ++terms_won_;
  }
  return Outcome{Change::kElected,
                 absl::StrCat("term of revision ", create_revision, ", lease ", lease_)};
}

LeaderElection::Outcome LeaderElection::StepAsStandby() {
  const absl::Time started = clock_->Now();
  etcd::RangeRequest read;
  read.key = options_.key;
  absl::StatusOr<etcd::RangeResult> current = kv_->Range(read);
  if (!current.ok()) {
    seen_at_revision_ = 0;
    SetError(current.status());
    absl::MutexLock lock(&mu_);
    leader_.clear();
    return Outcome{};
  }
  if (!current->kvs.empty()) {
    const etcd::KeyValue& key = current->kvs[0];
    if (lease_ != 0 && key.lease == lease_) {
      // Our own key from a term we stepped down from while etcd was unreachable: take it back
      // if the lease is still alive.
      absl::StatusOr<absl::Duration> renewed = kv_->LeaseKeepAlive(lease_);
      if (renewed.ok()) return Elect(key.create_revision, started);
      if (absl::IsNotFound(renewed.status())) lease_ = 0;
      SetError(renewed.status());
      return Outcome{};
    }
    seen_at_revision_ = current->revision;
    absl::MutexLock lock(&mu_);
    leader_ = key.value;
    last_error_ = absl::OkStatus();
    return Outcome{};
  }
  seen_at_revision_ = 0;
  // No leader: campaign with a live lease.
  if (lease_ != 0 && !kv_->LeaseKeepAlive(lease_).ok()) lease_ = 0;
  if (lease_ == 0) {
    absl::StatusOr<int64_t> granted = kv_->LeaseGrant(options_.lease_ttl);
    if (!granted.ok()) {
      SetError(granted.status());
      return Outcome{};
    }
    lease_ = *granted;
  }
  etcd::TxnRequest campaign;
  campaign.compare.push_back(etcd::Compare::Absent(options_.key));
  campaign.success.push_back(etcd::Op::Put(options_.key, options_.self, lease_));
  campaign.failure.push_back(etcd::Op::Get(options_.key));
  absl::StatusOr<etcd::TxnResult> won = kv_->Txn(campaign);
  if (!won.ok()) {
    SetError(won.status());
    return Outcome{};
  }
  if (won->succeeded) return Elect(won->revision, started);
  absl::MutexLock lock(&mu_);
  leader_ = !won->gets.empty() && !won->gets[0].kvs.empty() ? won->gets[0].kvs[0].value : "";
  last_error_ = absl::OkStatus();
  return Outcome{};
}

absl::Status LeaderElection::Resign() {
  const std::shared_ptr<LeaderFence> fence = this->fence();
  if (fence == nullptr) return absl::OkStatus();
  Depose("it resigned (shutting down)");
  etcd::TxnRequest resign;
  resign.compare.push_back(etcd::Compare::CreatedAt(options_.key, fence->revision()));
  resign.success.push_back(etcd::Op::Delete(options_.key));
  absl::Status status = kv_->Txn(resign).status();
  absl::Status revoked = kv_->LeaseRevoke(lease_);
  lease_ = 0;
  return status.ok() ? revoked : status;
}

}  // namespace ringleader
