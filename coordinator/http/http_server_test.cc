// HttpRouter (paths, {name} segments, 404/405 texts, content types) on its own, and HttpServer
// over loopback with cpp-httplib's client: GET /metrics, routed pages, 404 elsewhere, HEAD, a
// port in use refused, a bad address refused, Stop.
#include "coordinator/http/http_server.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::unique_ptr<HttpServer> StartOrDie(HttpRouter router) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1:0", std::move(router));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

HttpRouter MetricsOnly(std::function<std::string()> page) {
  HttpRouter router;
  EXPECT_TRUE(AddMetricsRoute(&router, std::move(page)).ok());
  return router;
}

// A handler answering "<name>: <params>" as text/html.
HttpHandler Echo(const std::string& name) {
  return [name](const HttpRequest& request) {
    HttpResponse response;
    response.content_type = "text/html; charset=utf-8";
    response.body = absl::StrCat(name, ":");
    for (const auto& [key, value] : request.params) {
      absl::StrAppend(&response.body, " ", key, "=", value);
    }
    return response;
  };
}

TEST(HttpRouterTest, LiteralAndParameterSegmentsMatchWholeSegments) {
  HttpRouter router;
  ASSERT_TRUE(router.Get("/", "home", Echo("home")).ok());
  ASSERT_TRUE(router.Get("/api/jobs", "jobs", Echo("jobs")).ok());
  ASSERT_TRUE(router.Get("/api/jobs/{job}", "job", Echo("job")).ok());
  ASSERT_TRUE(router.Get("/api/jobs/{job}/metrics", "metrics", Echo("metrics")).ok());

  EXPECT_EQ(router.Handle("GET", "/").body, "home:");
  EXPECT_EQ(router.Handle("GET", "/api/jobs").body, "jobs:");
  EXPECT_EQ(router.Handle("GET", "/api/jobs/job-000007").body, "job: job=job-000007");
  EXPECT_EQ(router.Handle("GET", "/api/jobs/j%201/metrics").body, "metrics: job=j%201");
  EXPECT_EQ(router.Handle("HEAD", "/api/jobs/job-1").body, "job: job=job-1");
  EXPECT_EQ(router.Handle("GET", "/api/jobs/job-1").content_type, "text/html; charset=utf-8");
  EXPECT_EQ(router.Handle("GET", "/api/jobs/job-1").status, 200);
  for (const char* path : {"/api/jobs/", "/api/jobs//metrics", "/api", "/api/jobs/a/b",
                           "/api/jobs/a/metrics/", "//", "/API/jobs"}) {
    const HttpResponse response = router.Handle("GET", path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(response.content_type, "text/plain; charset=utf-8") << path;
    EXPECT_THAT(response.body, HasSubstr(absl::StrCat("not found (HTTP 404): GET ", path, "\n")))
        << path;
  }
}

TEST(HttpRouterTest, HandlersSeeTheirParametersByName) {
  HttpRouter router;
  HttpRequest seen;
  ASSERT_TRUE(router
                  .Get("/a/{x}/b/{y}", "two",
                       [&seen](const HttpRequest& request) {
                         seen = request;
                         return HttpResponse();
                       })
                  .ok());
  EXPECT_EQ(router.Handle("HEAD", "/a/1/b/2").status, 200);
  EXPECT_EQ(seen.method, "HEAD");
  EXPECT_EQ(seen.path, "/a/1/b/2");
  EXPECT_THAT(seen.params, ElementsAre(Pair("x", "1"), Pair("y", "2")));
  EXPECT_EQ(seen.Param("y"), "2");
  EXPECT_EQ(seen.Param("z"), "");
}

TEST(HttpRouterTest, TheFirstRouteAddedWins) {
  HttpRouter router;
  ASSERT_TRUE(router.Get("/job/new", "literal", Echo("literal")).ok());
  ASSERT_TRUE(router.Get("/job/{job}", "param", Echo("param")).ok());
  EXPECT_EQ(router.Handle("GET", "/job/new").body, "literal:");
  EXPECT_EQ(router.Handle("GET", "/job/j-1").body, "param: job=j-1");
}

TEST(HttpRouterTest, The404TextListsEveryRoute) {
  HttpRouter router;
  ASSERT_TRUE(AddMetricsRoute(&router, [] { return std::string(); }).ok());
  ASSERT_TRUE(router.Get("/api/jobs/{job}", "one job as JSON", Echo("job")).ok());
  const HttpResponse response = router.Handle("GET", "/nope");
  EXPECT_EQ(response.status, 404);
  EXPECT_THAT(response.body, HasSubstr("it serves GET /metrics (Prometheus text format), "
                                       "GET /api/jobs/{job} (one job as JSON).\n"));
}

TEST(HttpRouterTest, OtherMethodsOnARoutedPathAre405WithAllow) {
  HttpRouter router;
  ASSERT_TRUE(router.Get("/api/jobs/{job}", "job", Echo("job")).ok());
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    const HttpResponse response = router.Handle(method, "/api/jobs/j-1");
    EXPECT_EQ(response.status, 405) << method;
    EXPECT_THAT(response.headers, ElementsAre(Pair("Allow", "GET, HEAD"))) << method;
    EXPECT_THAT(response.body, HasSubstr(absl::StrCat("(HTTP 405): ", method, " /api/jobs/j-1")));
  }
  EXPECT_EQ(router.Handle("POST", "/elsewhere").status, 404);
}

TEST(HttpRouterTest, BadPatternsAndDuplicatesAreRefused) {
  HttpRouter router;
  for (const char* pattern : {"", "metrics", "/a//b", "/a/", "/{}", "/{x}/{x}"}) {
    const absl::Status added = router.Get(pattern, "bad", Echo("bad"));
    EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument) << pattern;
    EXPECT_THAT(added.message(), HasSubstr(absl::StrCat("\"", pattern, "\""))) << pattern;
  }
  ASSERT_TRUE(router.Get("/x", "x", Echo("x")).ok());
  EXPECT_EQ(router.Get("/x", "again", Echo("x")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(router.Describe(), "GET /x (x)");
}

TEST(HttpServerTest, ServesTheFreshPageAtMetrics) {
  std::atomic<int> scrapes{0};
  std::unique_ptr<HttpServer> server = StartOrDie(
      MetricsOnly([&scrapes] { return absl::StrCat("ringleader_scrapes ", ++scrapes, "\n"); }));
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), absl::StrCat("127.0.0.1:", server->port()));

  httplib::Client client("127.0.0.1", server->port());
  for (int i = 1; i <= 2; ++i) {
    httplib::Result result = client.Get("/metrics");
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(result->body, absl::StrCat("ringleader_scrapes ", i, "\n"));
  }
}

TEST(HttpServerTest, OtherPathsAre404WithAClearText) {
  std::unique_ptr<HttpServer> server = StartOrDie(MetricsOnly([] { return std::string("x 1\n"); }));
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());
  for (const char* path : {"/", "/metricsz", "/metrics/extra", "/metrics/"}) {
    httplib::Result result = client.Get(path);
    ASSERT_TRUE(result) << path << ": " << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; charset=utf-8") << path;
    EXPECT_THAT(result->body, HasSubstr(absl::StrCat("not found (HTTP 404): GET ", path)));
    EXPECT_THAT(result->body, HasSubstr("serves GET /metrics"));
  }
}

TEST(HttpServerTest, RoutesAnswerWithTheirStatusHeadersAndContentType) {
  HttpRouter router;
  ASSERT_TRUE(router.Get("/page/{name}", "a page", Echo("page")).ok());
  ASSERT_TRUE(router
                  .Get("/gone/{name}", "always 404 as JSON",
                       [](const HttpRequest& request) {
                         HttpResponse response;
                         response.status = 404;
                         response.content_type = "application/json";
                         response.body =
                             absl::StrCat("{\"error\":\"no ", request.Param("name"), "\"}");
                         response.headers.push_back({"Cache-Control", "no-store"});
                         return response;
                       })
                  .ok());
  std::unique_ptr<HttpServer> server = StartOrDie(std::move(router));
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());

  httplib::Result page = client.Get("/page/a%20b?x=1");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->body, "page: name=a b");  // decoded, query ignored

  httplib::Result gone = client.Get("/gone/job-9");
  ASSERT_TRUE(gone) << httplib::to_string(gone.error());
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(gone->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(gone->get_header_value("Cache-Control"), "no-store");
  EXPECT_EQ(gone->body, "{\"error\":\"no job-9\"}");  // the handler's body, not a server text

  httplib::Result head = client.Head("/page/x");
  ASSERT_TRUE(head) << httplib::to_string(head.error());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(head->get_header_value("Content-Length"), "12");  // GET's "page: name=x"

  httplib::Result post = client.Post("/page/x", "data", "text/plain");
  ASSERT_TRUE(post) << httplib::to_string(post.error());
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST(HttpServerTest, APortInUseIsRefused) {
  std::unique_ptr<HttpServer> first = StartOrDie(MetricsOnly([] { return std::string(); }));
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start(first->address(), MetricsOnly([] { return std::string(); }));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("could not listen on ", first->address())));
}

TEST(HttpServerTest, AnAddressWithoutAPortIsRefused) {
  for (const char* listen : {"127.0.0.1", ":7071", "127.0.0.1:http", "127.0.0.1:70000"}) {
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(listen, MetricsOnly([] { return std::string(); }));
    ASSERT_FALSE(server.ok()) << listen;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << listen;
    EXPECT_THAT(server.status().message(), HasSubstr("is not host:port")) << listen;
  }
}

TEST(HttpServerTest, StopClosesThePortAndIsIdempotent) {
  std::unique_ptr<HttpServer> server = StartOrDie(MetricsOnly([] { return std::string("x 1\n"); }));
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  server->Stop();
  server->Stop();
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  httplib::Result result = client.Get("/metrics");
  EXPECT_FALSE(result) << "still answering after Stop: HTTP " << result->status;
}

}  // namespace
}  // namespace ringleader
