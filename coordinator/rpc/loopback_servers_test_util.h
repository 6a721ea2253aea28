// Servers and ports on 127.0.0.1 for the tests of clients that follow a leader over a list of
// coordinators: a gRPC server with a fake service and/or a standby, a port nobody listens on,
// and a port that accepts connections but never answers (a stopped coordinator).
#ifndef RINGLEADER_COORDINATOR_RPC_LOOPBACK_SERVERS_TEST_UTIL_H_
#define RINGLEADER_COORDINATOR_RPC_LOOPBACK_SERVERS_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

// A plaintext server on 127.0.0.1 with `service` and/or `generic` (either may be null);
// `*address` gets its "127.0.0.1:PORT".
inline std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service,
                                                     grpc::CallbackGenericService* generic,
                                                     std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  if (service != nullptr) builder.RegisterService(service);
  if (generic != nullptr) builder.RegisterCallbackGenericService(generic);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *address = absl::StrCat("127.0.0.1:", port);
  return server;
}

// A socket bound to a free loopback port; `listening`: accepting connections (the kernel's
// backlog) that nobody ever answers. Closed with the object.
struct LoopbackPort {
  int fd = -1;
  std::string address;
  ~LoopbackPort() {
    if (fd >= 0) close(fd);
  }
};

inline std::unique_ptr<LoopbackPort> BindLoopbackPort(bool listening) {
  auto port = std::make_unique<LoopbackPort>();
  port->fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (port->fd < 0 || bind(port->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listening && listen(port->fd, 16) != 0) ||
      getsockname(port->fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return nullptr;
  }
  port->address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  return port;
}

// A loopback port nobody listens on now (bound, then released): connections are refused.
inline std::string DeadLoopbackAddress() {
  std::unique_ptr<LoopbackPort> port = BindLoopbackPort(/*listening=*/false);
  return port != nullptr ? port->address : "127.0.0.1:1";
}

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_LOOPBACK_SERVERS_TEST_UTIL_H_
