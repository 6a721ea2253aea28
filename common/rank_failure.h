// Typed rank failures: why a rank failed, as decided where the failure is detected, carried up
// on the absl::Status as a payload (a serialized v1::RankFailure under kRankFailureUrl) and sent
// to the coordinator in FinishRankRequest.failure. The coordinator reasons over the kind, never
// over the error's words (docs/diagnosis.md, "Failure kinds").
//
//   // where it is detected: the code knows what happened
//   return WithFailureKind(absl::UnavailableError("peer rank 1 ... is gone"),
//                          v1::RankFailure::PEER_CLOSED, /*peer_rank=*/1);
//   // higher up: add what is known there, keeping the kind and the peer
//   v1::RankFailure where;
//   where.set_step(12);
//   status = AddRankFailure(status, where);
//   // at the end: the report
//   *request.mutable_failure() = FailureOf(status);
//
// WithPrefix (common/status_macros.h) keeps payloads, so the failure survives the context added
// on the way up. Every function here is a pure function of its arguments: safe from any thread.
#ifndef RINGLEADER_COMMON_RANK_FAILURE_H_
#define RINGLEADER_COMMON_RANK_FAILURE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/job_status.pb.h"

namespace ringleader {

// The payload's type URL.
inline constexpr char kRankFailureUrl[] = "type.googleapis.com/ringleader.v1.RankFailure";

// The failure attached to `status`; nullopt when it has none (an OK status never has one) or
// the payload does not parse.
std::optional<v1::RankFailure> RankFailureOf(const absl::Status& status);

// The failure to report for a failed `status`: its payload, or an unclassified one (kind
// KIND_UNSPECIFIED: the rank's own failure) when it has none.
v1::RankFailure FailureOf(const absl::Status& status);

// `status` with `failure` attached, replacing any failure it had. An OK status is returned
// unchanged (absl drops payloads of OK statuses; an OK status is no failure).
absl::Status WithRankFailure(absl::Status status, const v1::RankFailure& failure);

// `status` with the facts of `known` added to its failure: every field the status's failure
// leaves unset (kind KIND_UNSPECIFIED, no peer, step 0, no collective, signal 0) is taken from
// `known`; fields already set stay (the detection site knew best). A status without a failure
// gets `known`. An OK status is returned unchanged.
absl::Status AddRankFailure(absl::Status status, const v1::RankFailure& known);

// AddRankFailure with a failure of `kind`, and of peer `peer_rank` at `peer_address` when
// `peer_rank` >= 0: how a detection site marks its status.
absl::Status WithFailureKind(absl::Status status, v1::RankFailure::Kind kind, int peer_rank = -1,
                             const std::string& peer_address = "");

// Fills the unset fields of `into` from `from` (AddRankFailure's rule).
void MergeRankFailure(const v1::RankFailure& from, v1::RankFailure* into);

// A consequence of a peer's failure rather than a cause of its own: PEER_CLOSED,
// PEER_TIMED_OUT or ABORTED_BY_PEER, or any failure that names a peer (has_peer).
bool IsPeerSymptom(const v1::RankFailure& failure);

// A fault of the job itself (JOB_ERROR): running it again fails again.
bool IsJobError(const v1::RankFailure& failure);

// The kind in words: "peer closed", "peer timed out", "aborted by a peer", "signal",
// "out of memory", "I/O error", "job error", "stopped", "internal", "exited",
// "unclassified".
std::string KindName(v1::RankFailure::Kind kind);

// One line for logs and messages: "peer closed: peer rank 1 at 10.1.0.2:41729, step 12,
// collective #42 bucket 3"; "signal 9 (SIGKILL)"; "job error".
std::string Describe(const v1::RankFailure& failure);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_RANK_FAILURE_H_
