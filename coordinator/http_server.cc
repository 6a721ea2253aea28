#include "coordinator/http_server.h"

#include <sys/socket.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace ringleader {
namespace {

// Threads answering requests: a scrape is one short request every few seconds.
constexpr size_t kRequestThreads = 2;
// An idle keep-alive connection is closed after this long; Stop waits for it at most this long.
constexpr time_t kKeepAliveSeconds = 1;

}  // namespace

MetricsHttpServer::MetricsHttpServer() : server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, PageSource page) {
  const size_t colon = listen.rfind(':');
  int requested_port = 0;
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (colon == std::string::npos || host.empty() ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &requested_port) || requested_port < 0 ||
      requested_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen address \"", listen,
        "\" is not host:port (e.g. 127.0.0.1:7071; port 0 picks a free port)"));
  }

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  httplib::Server& http = *server->server_;
  // SO_REUSEADDR only (cpp-httplib's default adds SO_REUSEPORT, which would let two
  // coordinators share the port and Prometheus scrape either).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.new_task_queue = [] { return new httplib::ThreadPool(kRequestThreads); };
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  http.Get("/metrics", [page = std::move(page)](const httplib::Request&, httplib::Response& res) {
    res.set_content(page(), kMetricsContentType);
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_content(absl::StrCat(res.status == 404 ? "not found" : "refused", " (HTTP ",
                                 res.status, "): ", req.method, " ", req.path,
                                 "\nThis is the ringleader coordinator's metrics endpoint: it "
                                 "serves GET /metrics (Prometheus text format).\n"),
                    "text/plain; charset=utf-8");
  });

  if (requested_port == 0) {
    server->port_ = http.bind_to_any_port(host);
  } else if (http.bind_to_port(host, requested_port)) {
    server->port_ = requested_port;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "could not listen on ", listen,
        ": the port is in use, or the host is not an address of this machine"));
  }
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", server->port_);

  auto listening_ended = std::make_shared<absl::Notification>();
  server->listener_ = std::thread([&http, listening_ended] {
    http.listen_after_bind();
    listening_ended->Notify();
  });
  // Stop() before the accept loop runs would be lost (cpp-httplib's stop() acts only on a
  // running server): return once it runs. The loop starts within microseconds.
  while (!http.is_running() && !listening_ended->HasBeenNotified()) {
    absl::SleepFor(absl::Microseconds(200));
  }
  if (!http.is_running()) {
    return absl::UnavailableError(absl::StrCat("the HTTP server on ", server->address_,
                                               " stopped at once"));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  server_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace ringleader
