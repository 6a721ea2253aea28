#include "coordinator/http/http_server.h"

#include <sys/socket.h>

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace ringleader {
namespace {

// Threads answering requests: a scrape or a dashboard poll is a short request every few
// seconds; a dashboard page loads its few files at once.
constexpr size_t kRequestThreads = 4;
// An idle keep-alive connection is closed after this long; Stop waits for it at most this long.
constexpr time_t kKeepAliveSeconds = 1;

// "/" → {}; "/a/b" → {"a", "b"}; "/a/" → {"a", ""}.
std::vector<std::string> Segments(const std::string& path) {
  if (path.empty() || path == "/") return {};
  return absl::StrSplit(path.substr(1), '/');
}

bool IsParameter(const std::string& segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

HttpResponse Text(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

}  // namespace

std::string HttpRequest::Param(const std::string& name) const {
  auto found = params.find(name);
  return found == params.end() ? "" : found->second;
}

absl::Status HttpRouter::Get(const std::string& pattern, const std::string& what,
                             HttpHandler handler) {
  if (pattern.empty() || pattern.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("route pattern \"", pattern, "\" does not start with '/'"));
  }
  Route route{pattern, Segments(pattern), what, std::move(handler)};
  std::set<std::string> names;
  for (const std::string& segment : route.segments) {
    if (segment.empty() || segment == "{}") {
      return absl::InvalidArgumentError(
          absl::StrCat("route pattern \"", pattern, "\" has an empty segment or an unnamed {}"));
    }
    if (IsParameter(segment) && !names.insert(segment).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("route pattern \"", pattern, "\" names ", segment, " twice"));
    }
  }
  for (const Route& existing : routes_) {
    if (existing.pattern == pattern) {
      return absl::AlreadyExistsError(absl::StrCat("route ", pattern, " is already served"));
    }
  }
  routes_.push_back(std::move(route));
  return absl::OkStatus();
}

bool HttpRouter::Matches(const Route& route, const std::vector<std::string>& segments,
                         std::map<std::string, std::string>* params) {
  if (route.segments.size() != segments.size()) return false;
  std::map<std::string, std::string> found;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& expected = route.segments[i];
    if (IsParameter(expected)) {
      if (segments[i].empty()) return false;
      found[expected.substr(1, expected.size() - 2)] = segments[i];
    } else if (expected != segments[i]) {
      return false;
    }
  }
  *params = std::move(found);
  return true;
}

std::string HttpRouter::Describe() const {
  std::vector<std::string> parts;
  for (const Route& route : routes_) {
    parts.push_back(absl::StrCat("GET ", route.pattern, " (", route.what, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

HttpResponse HttpRouter::Handle(const std::string& method, const std::string& path) const {
  const std::vector<std::string> segments = Segments(path);
  for (const Route& route : routes_) {
    HttpRequest request{method, path, {}};
    if (!Matches(route, segments, &request.params)) continue;
    if (method != "GET" && method != "HEAD") {
      HttpResponse refused =
          Text(405, absl::StrCat("method not allowed (HTTP 405): ", method, " ", path, "\n", path,
                                 " answers GET and HEAD only.\n"));
      refused.headers.push_back({"Allow", "GET, HEAD"});
      return refused;
    }
    return route.handler(request);
  }
  return Text(404, absl::StrCat("not found (HTTP 404): ", method, " ", path,
                                "\nThis is the ringleader coordinator's HTTP server: it serves ",
                                Describe(), ".\n"));
}

absl::Status AddMetricsRoute(HttpRouter* router, std::function<std::string()> page) {
  return router->Get("/metrics", "Prometheus text format",
                     [page = std::move(page)](const HttpRequest&) {
                       HttpResponse response;
                       response.content_type = kMetricsContentType;
                       response.body = page();
                       return response;
                     });
}

HttpServer::HttpServer(HttpRouter router)
    : router_(std::move(router)), server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              HttpRouter router) {
  const size_t colon = listen.rfind(':');
  int requested_port = 0;
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (colon == std::string::npos || host.empty() ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &requested_port) || requested_port < 0 ||
      requested_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", listen,
                     "\" is not host:port (e.g. 127.0.0.1:7071; port 0 picks a free port)"));
  }

  std::unique_ptr<HttpServer> server(new HttpServer(std::move(router)));
  httplib::Server& http = *server->server_;
  // SO_REUSEADDR only (cpp-httplib's default adds SO_REUSEPORT, which would let two
  // coordinators share the port and Prometheus scrape either).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.new_task_queue = [] { return new httplib::ThreadPool(kRequestThreads); };
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  // Every request, whatever its method, is answered by the router.
  const HttpRouter* routes = &server->router_;
  http.set_pre_routing_handler([routes](const httplib::Request& req, httplib::Response& res) {
    HttpResponse answer = routes->Handle(req.method, req.path);
    res.status = answer.status;
    for (const auto& [name, value] : answer.headers) res.set_header(name, value);
    res.set_content(answer.body, answer.content_type);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Requests cpp-httplib refuses before routing (malformed, too long) get a line saying so.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        res.set_content(absl::StrCat("refused (HTTP ", res.status, ")\n"), kTextContentType);
        return httplib::Server::HandlerResponse::Handled;
      }));

  if (requested_port == 0) {
    server->port_ = http.bind_to_any_port(host);
  } else if (http.bind_to_port(host, requested_port)) {
    server->port_ = requested_port;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", listen,
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
    return absl::UnavailableError(
        absl::StrCat("the HTTP server on ", server->address_, " stopped at once"));
  }
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  server_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace ringleader
