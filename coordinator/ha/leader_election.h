// Leader election among coordinators sharing one etcd, with a lease and a fenced term.
//
// The leader holds the key `key` (value: its address for clients) attached to its lease of
// `lease_ttl`, renewed every lease_ttl / 2. The others are standbys: they read the key (its value
// is the leader clients are sent to), wait on it (AwaitLeaderChange) or poll it, and, once it is
// gone (the leader's lease expired or it resigned), race to create it; etcd lets exactly one
// create succeed. The
// revision that created the key names the term: LeaderFence (fenced_kv.h) conditions every
// write of the term on it.
//
//            key absent: create wins            fence lost (a refused write), the lease gone,
//   STANDBY ─────────────────────────> LEADER ─ or not renewed within lease_ttl by our clock ─┐
//      ^                                                                                       │
//      └───────────────────────────────────────────────────────────────────────────────────────┘
//
// Renewing every TTL/2 rather than more often: a killed leader's lease runs out TTL after its
// last renewal, so sparser renewals mean a faster failover on average (1.5 to 3 s after the
// kill at the default TTL); a failed renewal is retried every TTL/10 until the TTL is spent.
//
// The clock check makes a leader that cannot reach etcd (partitioned, or etcd without quorum)
// step down before its lease can have expired in etcd, so it never acts as leader beside a new
// one. Its lease is kept: when etcd comes back with the key still on that lease (etcd renews
// every lease when it elects a new etcd leader), the same coordinator takes the term back at
// once instead of waiting out the TTL.
//
// Driven by its owner: Step() does one round (at most a few etcd calls, each bounded by the
// EtcdKv's own call timeout) and next_step_in() says when to call it again; a standby may wait
// on the leader key instead (AwaitLeaderChange). Thread-safety:
// Step and Resign from the owner's thread; the getters from any thread.
#ifndef RINGLEADER_COORDINATOR_HA_LEADER_ELECTION_H_
#define RINGLEADER_COORDINATOR_HA_LEADER_ELECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/ha/fenced_kv.h"
#include "coordinator/store/etcd/etcd_kv.h"

namespace ringleader {

struct LeaderElectionOptions {
  // The leader key, e.g. "/ringleader/leader".
  std::string key;
  // This coordinator's address as clients dial it ("host:port"): the key's value.
  std::string self;
  // The leader's lease: how long after its last renewal a silent leader is replaced.
  absl::Duration lease_ttl = absl::Seconds(3);
  // How often a standby reads the key.
  absl::Duration poll_every = absl::Milliseconds(100);
  // Called (from any thread, no lock held) when the term's fence is lost, so the owner calls
  // Step at once instead of at its next poll. Must not block.
  std::function<void()> wake;
};

class LeaderElection {
 public:
  enum class Change { kNone, kElected, kDeposed };
  struct Outcome {
    Change change = Change::kNone;
    std::string reason;  // kDeposed: why (for the log); kElected: the term
  };

  // `kv` is shared with the term's job store (not owned alone); `clock` outlives this.
  LeaderElection(std::shared_ptr<etcd::EtcdKv> kv, Clock* clock, LeaderElectionOptions options);
  ~LeaderElection() = default;

  // One round (diagram above). etcd errors do not end it: they show in last_error().
  Outcome Step();
  // When to call Step again: a standby's poll, or a leader's next renewal.
  absl::Duration next_step_in() const;
  // A standby that saw a leader: blocks until the leader key changes (the leader's lease ran
  // out, it resigned) or `timeout` passes, through etcd's Watch, so the next Step campaigns at
  // once instead of at its next poll. Returns whether it changed. Errors: the EtcdKv's
  // (UNIMPLEMENTED, UNAVAILABLE: the owner polls instead); FAILED_PRECONDITION while leading or
  // before a leader was seen. Owner's thread.
  absl::StatusOr<bool> AwaitLeaderChange(absl::Duration timeout);
  // A leader gives the term up: deletes the key (if still its own) and revokes the lease, so a
  // standby takes over at its next poll. No-op for a standby. Errors: UNAVAILABLE (etcd);
  // the lease then runs out by itself.
  absl::Status Resign();

  bool leading() const;
  // The leader's address ("" unknown; self while leading).
  std::string leader() const;
  // The current term's fence; nullptr when not leading.
  std::shared_ptr<LeaderFence> fence() const;
  // The last etcd error a round saw (OK after a clean round).
  absl::Status last_error() const;
  // Terms this coordinator has won.
  int64_t terms_won() const;

 private:
  Outcome StepAsLeader();
  Outcome StepAsStandby();
  Outcome Elect(int64_t create_revision, absl::Time renewed_at);
  Outcome Depose(const std::string& reason);
  void SetError(absl::Status error);

  const std::shared_ptr<etcd::EtcdKv> kv_;
  Clock* const clock_;
  const LeaderElectionOptions options_;

  // Owner's thread only.
  int64_t lease_ = 0;  // 0: none held
  absl::Time renewed_at_;      // when the last successful renewal was sent
  absl::Time next_renewal_;
  int64_t seen_at_revision_ = 0;  // the store revision a standby last read a leader at (0: none)

  mutable absl::Mutex mu_;
  std::shared_ptr<LeaderFence> fence_ ABSL_GUARDED_BY(mu_);
  std::string leader_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  int64_t terms_won_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HA_LEADER_ELECTION_H_
