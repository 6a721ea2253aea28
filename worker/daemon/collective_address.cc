#include "worker/daemon/collective_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringleader {

absl::StatusOr<std::string> LocalAddressTowards(const std::string& coordinator) {
  const size_t colon = coordinator.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == coordinator.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator address '", coordinator, "': expected HOST:PORT"));
  }
  std::string host = coordinator.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = coordinator.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("coordinator address '", coordinator,
                                                   "': cannot resolve '", host,
                                                   "': ", gai_strerror(error)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  std::string last_error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    close(fd);
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = local.ss_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) return std::string(text);
  }
  return absl::UnavailableError(absl::StrCat("no route to the coordinator at ", coordinator, ": ",
                                             last_error));
}

bool SetsCollectiveHost(const std::vector<std::string>& rank_args) {
  for (const std::string& arg : rank_args) {
    if (absl::StartsWith(arg, "--collective_host")) return true;
  }
  return false;
}

}  // namespace ringleader
