// Several coordinators (a leader and its standbys) as one "host:port[,host:port...]" list, and
// which of them a client talks to now.
//
// A standby answers every WorkerService and JobService call with UNAVAILABLE and, when it knows
// the leader, names it in the trailing metadata `kLeaderMetadataKey` ("host:port"); the call was
// not executed, so it may be sent again to the leader whatever it does. Clients keep the list in
// a LeaderTracker and call OnRefused() after each UNAVAILABLE: with the standby's hint they
// switch to the leader, without one (connection refused, no answer) they move to the next
// address. A single address is the common case: the tracker then always answers that address.
//
// Plain C++ (no gRPC): the worker's and the CLI's gRPC clients share it.
#ifndef RINGLEADER_COMMON_COORDINATOR_ADDRESSES_H_
#define RINGLEADER_COMMON_COORDINATOR_ADDRESSES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringleader {

// Trailing metadata of a standby's refusal: the leader's "host:port" (absent while no leader is
// elected).
inline constexpr char kLeaderMetadataKey[] = "ringleader-leader";

// "host:port[,host:port...]" -> the addresses in order, spaces around each trimmed. Refuses
// (INVALID_ARGUMENT, naming the entry and the expected form) an empty list, an empty entry, an
// entry without a port (or with a non-numeric one) and an address given twice. IPv6 hosts go in
// brackets: "[::1]:7070".
absl::StatusOr<std::vector<std::string>> ParseCoordinatorAddresses(absl::string_view list);

// The coordinator addresses a client knows and the one it talks to now. Thread-safe.
class LeaderTracker {
 public:
  // `addresses` must not be empty (ParseCoordinatorAddresses's result); the first is current.
  explicit LeaderTracker(std::vector<std::string> addresses);

  // The address calls go to now.
  std::string current() const;
  // Every known address, in order (the list given, then leaders learnt from hints).
  std::vector<std::string> addresses() const;
  size_t size() const;

  // `refused` answered UNAVAILABLE. With a `leader_hint` (a standby named the leader) the hint
  // becomes current, appended to the list when new. Without one, the address after `refused`
  // becomes current, but only while `refused` is still current: concurrent calls refused by the
  // same coordinator move on once, not once each. Returns the new current address.
  std::string OnRefused(absl::string_view refused, absl::string_view leader_hint);

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_COORDINATOR_ADDRESSES_H_
