// The coordinator's HTTP edge: serves the Prometheus text page at GET /metrics (cpp-httplib).
//
//   GET /metrics  → 200, Content-Type "text/plain; version=0.0.4; charset=utf-8", the text the
//                   page source returns (taken afresh for every request)
//   anything else → an error status (404 for another path) with a text/plain line saying what
//                   this server serves
//
// The only HTTP in the coordinator: the core and the text format (prometheus_text.h) know
// nothing of it. One listening thread and a small pool answer requests (a scrape every few
// seconds needs no more). The port is bound without SO_REUSEPORT: a port another process
// listens on is refused rather than shared.
//
// Thread-safety: Start and Stop from one thread (main's); the page source is called on the
// server's threads, possibly concurrently, and must be thread-safe.
#ifndef RINGLEADER_COORDINATOR_HTTP_SERVER_H_
#define RINGLEADER_COORDINATOR_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ringleader {

// The Content-Type of the Prometheus text format the page is served as.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsHttpServer {
 public:
  // Returns the /metrics page's body.
  using PageSource = std::function<std::string()>;

  // Binds `listen` ("host:port" or "[v6 host]:port"; port 0 picks a free port) and serves until
  // Stop. Errors: INVALID_ARGUMENT (`listen` is not host:port), UNAVAILABLE (cannot bind: the
  // port is in use, or the host is not an address of this machine).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                                  PageSource page);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound port, and "host:port" with it (the host as given in `listen`).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Closes the listening socket, lets requests in progress finish and joins the threads.
  // Idempotent.
  void Stop();

 private:
  MetricsHttpServer();

  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
  std::string address_;
  bool stopped_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_SERVER_H_
