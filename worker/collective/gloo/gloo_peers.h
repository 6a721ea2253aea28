// Which peer a gloo transport error is about, with the right port.
//
// gloo's TCP errors name the peer only by address, and this gloo prints the port as the raw
// network-order field read as a host-order number: a listener on port 41729 (0xA301) shows up
// as "[127.0.0.1]:419" (0x01A3). Every rank knows the address each peer published for it in
// the rendezvous (the `<i>` blobs of connectFullMesh): decoding those and matching the printed
// figure both ways tells which rank the error is about and its real port.
//
// The peer travels with the absl::Status in its RankFailure payload (common/rank_failure.h:
// has_peer, peer_rank, peer_address), so the rank's FinishRank can name it to the coordinator.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_PEERS_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_PEERS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringleader {

// "host:port" ("[v6]:port") of a serialized gloo tcp Address (its sockaddr_storage first);
// nullopt when the bytes are too short or not IPv4/IPv6.
std::optional<std::string> DecodeGlooAddress(absl::string_view bytes);

struct PeerMatch {
  int rank = -1;
  std::string address;    // as the peer published it, "host:port"
  std::string printed;    // the address as gloo's message printed it, e.g. "[127.0.0.1]:419"
  bool byte_swapped = false;  // the printed port is the real one byte-swapped
};

// The first "[host]:port" in `message` that is one of `peers` (rank -> "host:port"), with the
// port as printed or byte-swapped; nullopt when none is.
std::optional<PeerMatch> FindPeerInGlooMessage(absl::string_view message,
                                               const std::map<int, std::string>& peers);

// `status` unchanged when it names no peer of `peers`; otherwise the same code with the
// message "<what> rank R at HOST:PORT: <message>" (plus a note when gloo printed the port
// byte-swapped), its payloads, and the peer added to its RankFailure (the kind stays; an
// unclassified status becomes PEER_CLOSED: a transport error about one peer).
absl::Status NamePeerInGlooError(const absl::Status& status,
                                 const std::map<int, std::string>& peers, absl::string_view what);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_GLOO_PEERS_H_
