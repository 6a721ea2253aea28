// Suspects and evidence for a failed attempt's reason: see culprit.h.
#include "coordinator/core/culprit.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rank_failure.h"
#include "common/rank_phase.h"

namespace ringleader {
namespace {

bool IsLoopbackHost(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "::1" ||
         host == "[::1]";
}

// The host part of "host:port" or "[v6]:port".
std::string HostOf(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

std::string SinceStep(const v1::RankStatus& rank) {
  return rank.has_last_step() ? absl::StrCat(" (last step ", rank.last_step().step(), ")")
                              : std::string(" (no step yet)");
}

std::string LastPhase(const RankEvidence& rank) {
  const std::string activity = DescribeActivity(rank.activity, rank.activity_age);
  return activity.empty() ? "" : absl::StrCat("; last phase ", activity);
}

std::string ProcessState(const RankEvidence& rank) {
  return rank.process_state.empty() ? ""
                                    : absl::StrCat("; process state ", rank.process_state);
}

// "stopped or frozen: silent for ..." / "host or daemon gone: ..." with the evidence.
std::string Evidence(const RankEvidence& rank, RankCondition condition) {
  const std::string silent = rank.silent ? ShortDuration(*rank.silent) : "?";
  if (condition == RankCondition::kFrozen) {
    return absl::StrCat("stopped or frozen: silent for ", silent, SinceStep(rank.status),
                        " while its daemon heartbeats (last ", ShortDuration(*rank.daemon_silent),
                        " ago)", ProcessState(rank), LastPhase(rank));
  }
  return absl::StrCat(
      "host or daemon gone: ",
      rank.daemon_silent ? absl::StrCat("no heartbeat from its daemon for ",
                                        ShortDuration(*rank.daemon_silent))
                         : std::string("its worker is no longer registered"),
      ", rank process silent for ", silent, SinceStep(rank.status), LastPhase(rank));
}

}  // namespace

std::string DescribeRank(const v1::RankStatus& rank) {
  return absl::StrCat("rank ", rank.rank(), " (worker ", rank.worker_name(), " on ", rank.host(),
                      ")");
}

std::string DescribeLastHeard(const RankEvidence& rank) {
  if (!rank.silent.has_value()) return "";
  const std::string name = PhaseName(rank.activity.phase());
  return absl::StrCat(
      "; its rank process was last heard from ", ShortDuration(*rank.silent), " ago",
      name.empty() ? "" : absl::StrCat(", ", name),
      rank.activity.detail().empty() ? "" : absl::StrCat(" (", rank.activity.detail(), ")"));
}

RankCondition Classify(const RankEvidence& rank, const std::optional<PeerBlame>& peer,
                       const CulpritOptions& options) {
  if (rank.status.finished()) return RankCondition::kFinished;
  if (!rank.silent.has_value()) return RankCondition::kNotJoined;
  const bool named = peer.has_value() && peer->rank == rank.status.rank();
  const absl::Duration bar = named ? options.peer_silent_after : options.silent_after;
  if (*rank.silent <= bar) return RankCondition::kAlive;
  const bool daemon_alive =
      rank.daemon_silent.has_value() && *rank.daemon_silent <= options.daemon_silent_after;
  return daemon_alive ? RankCondition::kFrozen : RankCondition::kGone;
}

std::string LoopbackHint(const PeerBlame& peer, const std::string& peer_host,
                         const std::string& failed_host) {
  if (!IsLoopbackHost(HostOf(peer.address)) || peer_host == failed_host) return "";
  return absl::StrCat("rank ", peer.rank, "'s collective address ", peer.address,
                      " is a loopback address, but it runs on ", peer_host, " and the rank that "
                      "could not reach it on ", failed_host,
                      ": set the worker's collective address (ringleader-worker "
                      "--collective_host=ADDR, or leave it unset to use the address of the "
                      "route to the coordinator)");
}

std::string DescribeOtherRanks(const std::vector<RankEvidence>& ranks,
                               std::optional<uint32_t> failed, const std::string& failed_host,
                               const std::optional<PeerBlame>& peer,
                               const CulpritOptions& options) {
  std::vector<std::string> parts;
  if (peer.has_value()) {
    for (const RankEvidence& rank : ranks) {
      if (rank.status.rank() != peer->rank) continue;
      const std::string hint = LoopbackHint(*peer, rank.status.host(), failed_host);
      if (!hint.empty()) parts.push_back(hint);
    }
  }
  std::vector<std::string> suspects;
  std::vector<std::string> others;
  std::map<std::string, int> unlisted;  // phase -> ranks not listed one by one
  for (const RankEvidence& rank : ranks) {
    if (failed.has_value() && rank.status.rank() == *failed) continue;
    const RankCondition condition = Classify(rank, peer, options);
    const bool named = peer.has_value() && peer->rank == rank.status.rank();
    if (condition == RankCondition::kFrozen || condition == RankCondition::kGone) {
      suspects.push_back(absl::StrCat(DescribeRank(rank.status), " ", Evidence(rank, condition)));
      continue;
    }
    // Nothing to say about a rank heard from that never said its phase (nor, when no rank
    // failed, about one that never joined: the caller names those).
    if (condition == RankCondition::kAlive && !named &&
        rank.activity.phase() == v1::RANK_PHASE_UNSPECIFIED) {
      continue;
    }
    if (condition == RankCondition::kNotJoined && !failed.has_value()) continue;
    std::string line;
    switch (condition) {
      case RankCondition::kFinished:
        line = rank.status.ok() ? "finished" : "failed";
        break;
      case RankCondition::kNotJoined:
        line = "not heard from since it was assigned";
        break;
      default: {
        const std::string activity = DescribeActivity(rank.activity, rank.activity_age);
        const bool unreachable = named && !peer->address.empty();
        line = absl::StrCat(unreachable ? "alive but unreachable at " + peer->address : "alive",
                            activity.empty() ? "" : ", ", activity);
      }
    }
    if (static_cast<int>(others.size()) < options.max_listed || named) {
      others.push_back(absl::StrCat(DescribeRank(rank.status), " ", line));
    } else {
      ++unlisted[line.substr(0, line.find(" for "))];
    }
  }
  for (const std::string& suspect : suspects) parts.push_back(absl::StrCat("suspect: ", suspect));
  for (const auto& [what, count] : unlisted) {
    others.push_back(absl::StrCat(count, " more rank", count == 1 ? "" : "s", " ", what));
  }
  if (!others.empty()) parts.push_back(absl::StrCat("other ranks: ", absl::StrJoin(others, "; ")));
  if (parts.empty()) return "";
  return absl::StrCat("; ", absl::StrJoin(parts, "; "));
}

std::optional<PeerBlame> PeerOf(const v1::RankFailure& failure) {
  if (!failure.has_peer()) return std::nullopt;
  return PeerBlame{failure.peer_rank(), failure.peer_address()};
}

FailureHandling HandlingOf(const v1::RankFailure& failure) {
  FailureHandling handling;
  handling.hold_for_cause = IsPeerSymptom(failure);
  handling.restartable = !IsJobError(failure);
  return handling;
}

}  // namespace ringleader
