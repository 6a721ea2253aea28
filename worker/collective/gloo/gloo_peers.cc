#include "worker/collective/gloo/gloo_peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

uint16_t Swap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }

// Splits "host:port" / "[v6]:port".
bool SplitAddress(const std::string& address, std::string* host, uint32_t* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::SimpleAtoi(address.substr(colon + 1), port);
}

}  // namespace

std::optional<std::string> DecodeGlooAddress(absl::string_view bytes) {
  sockaddr_storage ss;
  if (bytes.size() < sizeof(sa_family_t)) return std::nullopt;
  std::memset(&ss, 0, sizeof(ss));
  std::memcpy(&ss, bytes.data(), std::min(bytes.size(), sizeof(ss)));
  char text[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET && bytes.size() >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return absl::StrCat(text, ":", ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6 && bytes.size() >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return absl::StrCat("[", text, "]:", ntohs(in6->sin6_port));
  }
  return std::nullopt;
}

std::optional<PeerMatch> FindPeerInGlooMessage(absl::string_view message,
                                               const std::map<int, std::string>& peers) {
  for (size_t open = message.find('['); open != absl::string_view::npos;
       open = message.find('[', open + 1)) {
    const size_t close = message.find("]:", open);
    if (close == absl::string_view::npos) break;
    size_t end = close + 2;
    while (end < message.size() && message[end] >= '0' && message[end] <= '9') ++end;
    uint32_t printed_port = 0;
    if (!absl::SimpleAtoi(message.substr(close + 2, end - close - 2), &printed_port) ||
        printed_port > 0xFFFF) {
      continue;
    }
    const std::string host(message.substr(open + 1, close - open - 1));
    for (const auto& [rank, address] : peers) {
      std::string peer_host;
      uint32_t port = 0;
      if (!SplitAddress(address, &peer_host, &port) || peer_host != host) continue;
      const bool same = port == printed_port;
      const bool swapped = Swap16(static_cast<uint16_t>(port)) == printed_port;
      if (!same && !swapped) continue;
      return PeerMatch{rank, address, std::string(message.substr(open, end - open)),
                       !same && swapped};
    }
  }
  return std::nullopt;
}

absl::Status NamePeerInGlooError(const absl::Status& status,
                                 const std::map<int, std::string>& peers, absl::string_view what) {
  if (status.ok()) return status;
  const std::optional<PeerMatch> peer = FindPeerInGlooMessage(status.message(), peers);
  if (!peer.has_value()) return status;
  const absl::Status named = WithMessage(
      status,
      absl::StrCat(what, " rank ", peer->rank, " at ", peer->address, ": ", status.message(),
                   peer->byte_swapped
                       ? absl::StrCat(" (gloo prints the port byte-swapped: ", peer->printed,
                                      " is ", peer->address, ")")
                       : ""));
  return WithFailureKind(named, v1::RankFailure::PEER_CLOSED, peer->rank, peer->address);
}

}  // namespace ringleader
