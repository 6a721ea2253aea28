// The evidence part of a failed attempt's reason: which other rank is the likely culprit and
// why, and where every other rank was when the attempt failed.
//
// A rank is named as a suspect only with evidence, and the evidence is in the text:
//
//   rank process      its daemon        the rank is
//   -------------     -------------     ----------------------------------------------------
//   heard from        (any)             alive: not a suspect ("alive, connecting (3 peers)
//                                       for 15s")
//   silent            heartbeats        stopped or frozen: "stopped or frozen: silent for 8.2s
//                                       (last step 12) while its daemon heartbeats (0.4s ago);
//                                       process state stopped; last phase training (step 13)"
//   silent            silent too        host or daemon gone: "host or daemon gone: no
//                                       heartbeat for 3.1s, rank silent for 3.0s"
//   finished, failed  -                 its own failure is reported by its own reason
//   named by the failing rank as the peer it could not reach, and heard from: alive but
//                                       unreachable (a network partition), not frozen; "alive"
//                                       when the failure gives no address (shared memory)
//
// "Silent" means not heard from (join, report or keepalive: rank processes send one every
// second in every phase) for longer than `silent_after`; a rank named by the failing rank as
// its peer is held to a lower bar (`peer_silent_after`): a peer that closed its connection and
// went quiet is the cause even before `silent_after`. A daemon is silent after
// `daemon_silent_after` without a heartbeat.
//
// Ranks heard from that never said their phase are left out (there is nothing to say).
//
// Plain functions of their inputs: the Coordinator gathers the evidence under its lock; the
// tests build it by hand.
#ifndef RINGLEADER_COORDINATOR_CORE_CULPRIT_H_
#define RINGLEADER_COORDINATOR_CORE_CULPRIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/rank_phase.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// What the coordinator knows about one rank of the failed attempt.
struct RankEvidence {
  // rank, worker name and host, joined, finished, ok, last_step (as the job status holds them).
  v1::RankStatus status;
  // Since the rank process was last heard from; nullopt = never (it has not joined).
  std::optional<absl::Duration> silent;
  // Its last reported activity (phase_elapsed_ms as reported) and how long ago that report
  // arrived; phase UNSPECIFIED = never said.
  v1::RankActivity activity;
  absl::Duration activity_age;
  // Since its daemon's last heartbeat; nullopt = its worker is not registered any more.
  std::optional<absl::Duration> daemon_silent;
  // Its rank process's /proc state as the daemon last reported it ("" = unknown).
  std::string process_state;
};

// The peer a failing rank's failure is about (FinishRankRequest.failure's peer).
struct PeerBlame {
  uint32_t rank = 0;
  std::string address;  // "host:port" the failing rank used for it; "" = none (shared memory)
};

// The peer `failure` names; nullopt when it names none.
std::optional<PeerBlame> PeerOf(const v1::RankFailure& failure);

// What the coordinator does with a rank's failure, by its kind (docs/diagnosis.md, "Failure
// kinds"):
//   hold_for_cause  a consequence of a peer's failure (PEER_CLOSED, PEER_TIMED_OUT,
//                   ABORTED_BY_PEER, or any failure naming a peer): held briefly for the peer's
//                   own report while other ranks are unfinished (peer_failure_grace)
//   restartable     false for JOB_ERROR (running the job again fails again); true for every
//                   other kind (a machine's fault, a signal, OOM, I/O, ...: worth a restart)
struct FailureHandling {
  bool hold_for_cause = false;
  bool restartable = true;
};
FailureHandling HandlingOf(const v1::RankFailure& failure);

struct CulpritOptions {
  absl::Duration silent_after = absl::Seconds(5);        // CoordinatorOptions::silent_rank_after
  absl::Duration peer_silent_after = absl::Milliseconds(1500);  // > one keepalive interval
  absl::Duration daemon_silent_after = absl::Seconds(3);  // 1.5 x the heartbeat interval
  // Ranks described one by one in the "other ranks" part; the rest are counted by phase.
  int max_listed = 8;
};

enum class RankCondition {
  kNotJoined,     // never heard from
  kFinished,      // finished (its own report says how)
  kAlive,         // heard from recently
  kFrozen,        // silent, daemon heartbeats: stopped, frozen or hung
  kGone,          // silent, daemon silent too: host, daemon or network gone
};

// The condition of `rank`; `peer` lowers the silence bar when it names this rank.
RankCondition Classify(const RankEvidence& rank, const std::optional<PeerBlame>& peer,
                       const CulpritOptions& options);

// "rank R (worker NAME on HOST)", as failure reasons name a rank.
std::string DescribeRank(const v1::RankStatus& rank);

// The text after a failing rank's own message:
//   "[; <hint>]; suspect: <rank> <condition>: <evidence>[; suspect: ...][; other ranks: ...]"
// `failed` is the rank whose failure ends the attempt (not described; nullopt = none, e.g. a
// rendezvous deadline). `failed_host` is its host (for the loopback hint). Returns "" when
// there is nothing to add.
std::string DescribeOtherRanks(const std::vector<RankEvidence>& ranks,
                               std::optional<uint32_t> failed, const std::string& failed_host,
                               const std::optional<PeerBlame>& peer,
                               const CulpritOptions& options);

// A lost rank's last sign of life: "; its rank process was last heard from 10s ago, training
// (step 13)"; "" when it never was.
std::string DescribeLastHeard(const RankEvidence& rank);

// The hint for a peer whose collective address is loopback while it runs on another host than
// the failing rank; "" otherwise.
std::string LoopbackHint(const PeerBlame& peer, const std::string& peer_host,
                         const std::string& failed_host);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_CULPRIT_H_
