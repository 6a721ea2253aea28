// MetricsHttpServer over loopback, with cpp-httplib's client: GET /metrics, 404 elsewhere, a
// port in use refused, a bad address refused, Stop.
#include "coordinator/http_server.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<MetricsHttpServer> StartOrDie(MetricsHttpServer::PageSource page) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1:0", std::move(page));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(MetricsHttpServerTest, ServesTheFreshPageAtMetrics) {
  std::atomic<int> scrapes{0};
  std::unique_ptr<MetricsHttpServer> server = StartOrDie(
      [&scrapes] { return absl::StrCat("ringleader_scrapes ", ++scrapes, "\n"); });
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), absl::StrCat("127.0.0.1:", server->port()));

  httplib::Client client("127.0.0.1", server->port());
  for (int i = 1; i <= 2; ++i) {
    httplib::Result result = client.Get("/metrics");
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->get_header_value("Content-Type"),
              "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(result->body, absl::StrCat("ringleader_scrapes ", i, "\n"));
  }
}

TEST(MetricsHttpServerTest, OtherPathsAre404WithAClearText) {
  std::unique_ptr<MetricsHttpServer> server = StartOrDie([] { return std::string("x 1\n"); });
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());
  for (const char* path : {"/", "/metricsz", "/metrics/extra"}) {
    httplib::Result result = client.Get(path);
    ASSERT_TRUE(result) << path << ": " << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_THAT(result->body, HasSubstr(absl::StrCat("not found (HTTP 404): GET ", path)));
    EXPECT_THAT(result->body, HasSubstr("serves GET /metrics"));
  }
}

TEST(MetricsHttpServerTest, APortInUseIsRefused) {
  std::unique_ptr<MetricsHttpServer> first = StartOrDie([] { return std::string(); });
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second = MetricsHttpServer::Start(
      first->address(), [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("could not listen on ", first->address())));
}

TEST(MetricsHttpServerTest, AnAddressWithoutAPortIsRefused) {
  for (const char* listen : {"127.0.0.1", ":7071", "127.0.0.1:http", "127.0.0.1:70000"}) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
        MetricsHttpServer::Start(listen, [] { return std::string(); });
    ASSERT_FALSE(server.ok()) << listen;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << listen;
    EXPECT_THAT(server.status().message(), HasSubstr("is not host:port")) << listen;
  }
}

TEST(MetricsHttpServerTest, StopClosesThePortAndIsIdempotent) {
  std::unique_ptr<MetricsHttpServer> server = StartOrDie([] { return std::string("x 1\n"); });
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
