// Fencing: every write a leader makes is an etcd transaction that also checks it still leads.
//
// A leader holds the leader key, created at one revision (its term). FencedEtcdKv adds the
// compare "the leader key is the one created at that revision" to every Put, DeleteRange and
// Txn it forwards, so a deposed leader (paused past its lease, partitioned, resumed) can change
// nothing: its write is refused by etcd itself, whatever the deposed process believes. The
// first refused write marks the fence lost (LeaderFence::Lose) and calls its `on_lost`, which
// makes the coordinator step down; from then on every write is refused without asking etcd.
//
//   LeaderFence ──shared by──> FencedEtcdKv (the term's job store writes through it)
//        └── Lose(reason) ──> on_lost(reason)   once; also called by the election itself
//
// Reads pass through unfenced. Thread-safe.
#ifndef RINGLEADER_COORDINATOR_HA_FENCED_KV_H_
#define RINGLEADER_COORDINATOR_HA_FENCED_KV_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/etcd/etcd_kv.h"

namespace ringleader {

// One leadership term: the leader key and the revision that created it.
class LeaderFence {
 public:
  // `on_lost` runs once, on the thread that lost the fence, without any lock held: it must not
  // block (the coordinator posts the step-down to its own thread).
  LeaderFence(std::string leader_key, int64_t create_revision,
              std::function<void(const std::string&)> on_lost)
      : key_(std::move(leader_key)), revision_(create_revision), on_lost_(std::move(on_lost)) {}

  const std::string& key() const { return key_; }
  int64_t revision() const { return revision_; }

  // Marks the term over (idempotent); the first call runs on_lost(reason).
  void Lose(const std::string& reason);
  // "" while the term holds, else why it ended.
  std::string lost() const;

 private:
  const std::string key_;
  const int64_t revision_;
  const std::function<void(const std::string&)> on_lost_;
  mutable absl::Mutex mu_;
  std::string lost_ ABSL_GUARDED_BY(mu_);
};

class FencedEtcdKv : public etcd::EtcdKv {
 public:
  // `kv` and `fence` are shared with the election (not owned alone); both outlive nothing.
  FencedEtcdKv(std::shared_ptr<etcd::EtcdKv> kv, std::shared_ptr<LeaderFence> fence)
      : kv_(std::move(kv)), fence_(std::move(fence)) {}

  absl::StatusOr<etcd::RangeResult> Range(const etcd::RangeRequest& request) override {
    return kv_->Range(request);
  }
  // Writes. Errors, besides the underlying store's: UNAVAILABLE "this coordinator no longer
  // leads" when the fence is lost (before or by this write).
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value) override;
  absl::StatusOr<int64_t> DeleteRange(const std::string& key,
                                      const std::string& range_end) override;
  // A Txn whose own compares fail answers succeeded = false as usual (with its own gets).
  absl::StatusOr<etcd::TxnResult> Txn(const etcd::TxnRequest& request) override;
  std::string Describe() const override { return kv_->Describe(); }

 private:
  absl::Status Refused() const;

  const std::shared_ptr<etcd::EtcdKv> kv_;
  const std::shared_ptr<LeaderFence> fence_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HA_FENCED_KV_H_
