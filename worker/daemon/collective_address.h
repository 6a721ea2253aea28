// The address a worker's ranks listen on for their peers (gloo's listener; a command job's
// MASTER_ADDR): by default the local address of the route to the coordinator, which is the
// address other hosts reach this one at in a cluster whose hosts all reach the coordinator. A
// single-host cluster (coordinator on 127.0.0.1) gets 127.0.0.1.
#ifndef RINGLEADER_WORKER_DAEMON_COLLECTIVE_ADDRESS_H_
#define RINGLEADER_WORKER_DAEMON_COLLECTIVE_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringleader {

// The local IP address the kernel would use to reach `coordinator` ("host:port", "[v6]:port";
// host a name or an address). Sends nothing (a UDP socket is connected, not used).
// Errors: INVALID_ARGUMENT (no port, or the host does not resolve), UNAVAILABLE (no route).
absl::StatusOr<std::string> LocalAddressTowards(const std::string& coordinator);

// Whether `rank_args` already set --collective_host (then the worker adds none).
bool SetsCollectiveHost(const std::vector<std::string>& rank_args);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_COLLECTIVE_ADDRESS_H_
