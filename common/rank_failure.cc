#include "common/rank_failure.h"

#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringleader {

std::optional<v1::RankFailure> RankFailureOf(const absl::Status& status) {
  const absl::optional<absl::Cord> payload = status.GetPayload(kRankFailureUrl);
  if (!payload.has_value()) return std::nullopt;
  v1::RankFailure failure;
  if (!failure.ParseFromString(std::string(*payload))) return std::nullopt;
  return failure;
}

v1::RankFailure FailureOf(const absl::Status& status) {
  std::optional<v1::RankFailure> failure = RankFailureOf(status);
  return failure.has_value() ? *std::move(failure) : v1::RankFailure();
}

absl::Status WithRankFailure(absl::Status status, const v1::RankFailure& failure) {
  if (status.ok()) return status;
  status.SetPayload(kRankFailureUrl, absl::Cord(failure.SerializeAsString()));
  return status;
}

void MergeRankFailure(const v1::RankFailure& from, v1::RankFailure* into) {
  if (into->kind() == v1::RankFailure::KIND_UNSPECIFIED) into->set_kind(from.kind());
  if (!into->has_peer() && from.has_peer()) {
    into->set_has_peer(true);
    into->set_peer_rank(from.peer_rank());
    into->set_peer_address(from.peer_address());
  }
  if (into->step() == 0) into->set_step(from.step());
  if (!into->has_collective() && from.has_collective()) {
    into->set_has_collective(true);
    into->set_collective_sequence(from.collective_sequence());
    into->set_bucket(from.bucket());
  }
  if (into->signal() == 0) into->set_signal(from.signal());
}

absl::Status AddRankFailure(absl::Status status, const v1::RankFailure& known) {
  if (status.ok()) return status;
  v1::RankFailure failure = FailureOf(status);
  MergeRankFailure(known, &failure);
  return WithRankFailure(std::move(status), failure);
}

absl::Status WithFailureKind(absl::Status status, v1::RankFailure::Kind kind, int peer_rank,
                             const std::string& peer_address) {
  v1::RankFailure known;
  known.set_kind(kind);
  if (peer_rank >= 0) {
    known.set_has_peer(true);
    known.set_peer_rank(static_cast<uint32_t>(peer_rank));
    known.set_peer_address(peer_address);
  }
  return AddRankFailure(std::move(status), known);
}

bool IsPeerSymptom(const v1::RankFailure& failure) {
  switch (failure.kind()) {
    case v1::RankFailure::PEER_CLOSED:
    case v1::RankFailure::PEER_TIMED_OUT:
    case v1::RankFailure::ABORTED_BY_PEER:
      return true;
    default:
      return failure.has_peer();
  }
}

bool IsJobError(const v1::RankFailure& failure) {
  return failure.kind() == v1::RankFailure::JOB_ERROR;
}

std::string KindName(v1::RankFailure::Kind kind) {
  switch (kind) {
    case v1::RankFailure::PEER_CLOSED:
      return "peer closed";
    case v1::RankFailure::PEER_TIMED_OUT:
      return "peer timed out";
    case v1::RankFailure::ABORTED_BY_PEER:
      return "aborted by a peer";
    case v1::RankFailure::SIGNAL:
      return "signal";
    case v1::RankFailure::OUT_OF_MEMORY:
      return "out of memory";
    case v1::RankFailure::IO_ERROR:
      return "I/O error";
    case v1::RankFailure::JOB_ERROR:
      return "job error";
    case v1::RankFailure::STOPPED:
      return "stopped";
    case v1::RankFailure::INTERNAL:
      return "internal";
    case v1::RankFailure::EXITED:
      return "exited";
    default:
      return "unclassified";
  }
}

std::string Describe(const v1::RankFailure& failure) {
  std::string head = KindName(failure.kind());
  if (failure.kind() == v1::RankFailure::SIGNAL && failure.signal() != 0) {
    absl::StrAppend(&head, " ", failure.signal());
  }
  std::vector<std::string> facts;
  if (failure.has_peer()) {
    facts.push_back(absl::StrCat("peer rank ", failure.peer_rank(),
                                 failure.peer_address().empty() ? "" : " at ",
                                 failure.peer_address()));
  }
  if (failure.step() != 0) facts.push_back(absl::StrCat("step ", failure.step()));
  if (failure.has_collective()) {
    facts.push_back(absl::StrCat("collective #", failure.collective_sequence(), " bucket ",
                                 failure.bucket()));
  }
  if (facts.empty()) return head;
  return absl::StrCat(head, ": ", absl::StrJoin(facts, ", "));
}

}  // namespace ringleader
