// Where a worker daemon sits in the cluster, as the scheduler packs a job's ranks by it:
// "RACK/HOST" or "HOST" (a worker's --topology; by default its host name). Each part is 1 to 128
// characters of letters, digits, '.', '_' and '-'. Workers with the same topology share a host;
// workers under the same RACK share a rack (workers without a rack share the empty one).
#ifndef RINGLEADER_COMMON_TOPOLOGY_H_
#define RINGLEADER_COMMON_TOPOLOGY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringleader {

struct Topology {
  std::string rack;  // "" = none given
  std::string host;
};

// Errors: INVALID_ARGUMENT saying what is wrong and what is expected (the caller names the flag or
// field), e.g. "'r1/n1/x' has 3 parts: give RACK/HOST or HOST, e.g. rack1/node7".
absl::StatusOr<Topology> ParseTopology(absl::string_view text);

// "RACK/HOST", or "HOST" without a rack.
std::string FormatTopology(const Topology& topology);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_TOPOLOGY_H_
