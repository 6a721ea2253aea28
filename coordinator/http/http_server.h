// The coordinator's HTTP edge: a small router (HttpRouter) and the server that answers it over
// cpp-httplib (HttpServer). CoordinatorServer (coordinator/server/coordinator_server.h) routes
// GET /metrics (the Prometheus text page, see AddMetricsRoute) and the dashboard's pages and
// JSON API (dashboard/dashboard_routes.h).
//
//   a route's path → 200 (or the status its handler sets), the handler's Content-Type and body
//   GET/HEAD on a path no route matches → 404, text/plain: the method, the path and every
//                                          route this server serves
//   another method on a path a route matches → 405 (Allow: GET, HEAD); elsewhere 404
//   HEAD → what GET answers, without the body
//
// A route's pattern is a path of literal segments and {name} segments ("/api/jobs/{job}"): a
// literal matches itself, {name} one non-empty segment (decoded, handed to the handler by
// name). "/" matches only "/"; a trailing slash is a segment of its own ("/metrics/" is not
// "/metrics"). Routes are tried in the order they were added. The query string is ignored.
//
// The only HTTP in the coordinator: the core, the text format (prometheus_text.h) and the RPC
// handler know nothing of it. One listening thread and a small pool answer requests (a scrape
// or a dashboard poll every few seconds needs no more). The port is bound without SO_REUSEPORT:
// a port another process listens on is refused rather than shared.
//
// Thread-safety: an HttpRouter is built on one thread, then handed to HttpServer::Start and
// only read. Start and Stop from one thread (the owner's); handlers run on the server's threads,
// possibly concurrently, and must be thread-safe.
#ifndef RINGLEADER_COORDINATOR_HTTP_HTTP_SERVER_H_
#define RINGLEADER_COORDINATOR_HTTP_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ringleader {

// The Content-Type of the Prometheus text format the /metrics page is served as.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr char kTextContentType[] = "text/plain; charset=utf-8";

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (handlers only see these)
  std::string path;    // decoded, without the query string
  // The route's {name} segments, by name.
  std::map<std::string, std::string> params;

  // The segment matched by {name}; "" when the route has none of that name.
  std::string Param(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = kTextContentType;
  std::string body;
  // Further headers, e.g. {"Cache-Control", "no-store"}.
  std::vector<std::pair<std::string, std::string>> headers;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpRouter {
 public:
  // Adds a GET (and HEAD) route; `what` describes it in the 404 text, e.g. "Prometheus text
  // format". Errors: INVALID_ARGUMENT (the pattern does not start with '/', has an empty
  // segment other than "/" itself, or an empty or repeated {name}), ALREADY_EXISTS (the same
  // pattern twice).
  absl::Status Get(const std::string& pattern, const std::string& what, HttpHandler handler);

  // The answer to `method` on `path` (see the file comment): the first matching route's
  // handler, or the 404/405 text. HEAD is answered as GET (the server drops the body).
  HttpResponse Handle(const std::string& method, const std::string& path) const;

  // "GET /metrics (Prometheus text format), GET / (...)": what the 404 text lists.
  std::string Describe() const;

 private:
  struct Route {
    std::string pattern;
    std::vector<std::string> segments;  // "{name}" for a parameter
    std::string what;
    HttpHandler handler;
  };
  // Whether `route` matches `segments`; fills `params` when it does.
  static bool Matches(const Route& route, const std::vector<std::string>& segments,
                      std::map<std::string, std::string>* params);

  std::vector<Route> routes_;
};

// Adds GET /metrics: 200, kMetricsContentType, `page()` taken afresh for every request.
// Errors: as HttpRouter::Get (ALREADY_EXISTS when added twice).
absl::Status AddMetricsRoute(HttpRouter* router, std::function<std::string()> page);

class HttpServer {
 public:
  // Binds `listen` ("host:port" or "[v6 host]:port"; port 0 picks a free port) and answers
  // with `router` until Stop. Errors: INVALID_ARGUMENT (`listen` is not host:port),
  // UNAVAILABLE (cannot bind: the port is in use, or the host is not an address of this
  // machine).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           HttpRouter router);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port, and "host:port" with it (the host as given in `listen`).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Closes the listening socket, lets requests in progress finish and joins the threads.
  // Idempotent.
  void Stop();

 private:
  explicit HttpServer(HttpRouter router);

  const HttpRouter router_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
  std::string address_;
  bool stopped_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_HTTP_SERVER_H_
