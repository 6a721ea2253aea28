// The coordinator's /metrics scraped by a real Prometheus (Debian's /usr/bin/prometheus; this
// test fails without it): a cluster with the metrics server on a free port runs a long job;
// Prometheus scrapes every second and its query API must show the running job, both ranks'
// steps and the RPC counters; after a cancel it must show the job cancelled.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cluster.h"
#include "worker/daemon/child_process.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A port nobody listens on right now (bound and released: the usual small race).
int FreePort() {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(sock);
  return port;
}

// A Prometheus server's instant-query API.
class PrometheusQueries {
 public:
  explicit PrometheusQueries(int port) : client_("127.0.0.1", port) {
    client_.set_connection_timeout(2);
    client_.set_read_timeout(5);
  }

  // Each series of `query`'s result: its labels and value; nullopt when the query failed
  // (Prometheus not up yet, or an error answer), with the reason in `last_error`.
  std::optional<std::vector<std::pair<std::map<std::string, std::string>, double>>> Query(
      const std::string& query) {
    const httplib::Params params = {{"query", query}};
    httplib::Result result = client_.Get("/api/v1/query", params, httplib::Headers());
    if (!result) {
      last_error = absl::StrCat("no answer: ", httplib::to_string(result.error()));
      return std::nullopt;
    }
    if (result->status != 200) {
      last_error = absl::StrCat("HTTP ", result->status, ": ", result->body);
      return std::nullopt;
    }
    const nlohmann::json answer = nlohmann::json::parse(result->body, nullptr, false);
    if (answer.is_discarded() || answer.value("status", "") != "success") {
      last_error = absl::StrCat("bad answer: ", result->body);
      return std::nullopt;
    }
    std::vector<std::pair<std::map<std::string, std::string>, double>> series;
    for (const nlohmann::json& item : answer["data"]["result"]) {
      std::map<std::string, std::string> labels;
      for (const auto& [key, value] : item["metric"].items()) labels[key] = value;
      double value = 0;
      if (!absl::SimpleAtod(item["value"][1].get<std::string>(), &value)) continue;
      series.emplace_back(std::move(labels), value);
    }
    last_answer = result->body;
    return series;
  }

  // Whether `query` answers exactly one series with value `expected`.
  bool Equals(const std::string& query, double expected) {
    auto series = Query(query);
    return series.has_value() && series->size() == 1 && (*series)[0].second == expected;
  }

  std::string last_error;
  std::string last_answer;

 private:
  httplib::Client client_;
};

TEST(MetricsE2eTest, PrometheusScrapesTheRunningJobAndSeesItCancelled) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's prometheus package (deploy/setup.sh)";
  const absl::Time test_start = absl::Now();
  const fs::path tmp = std::getenv("TEST_TMPDIR");
  const int metrics_port = FreePort();
  ASSERT_GT(metrics_port, 0);

  ClusterOptions options;
  options.coordinator_flags = {absl::StrCat("--http_listen=127.0.0.1:", metrics_port)};
  absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;

  // Long enough to be scraped several times; cancelled below.
  v1::JobSpec spec = UntilCancelledSpec("scraped");
  absl::StatusOr<std::string> job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();

  // Prometheus, scraping the coordinator every second.
  const int prometheus_port = FreePort();
  ASSERT_GT(prometheus_port, 0);
  const std::string config = (tmp / "prometheus.yml").string();
  {
    std::ofstream out(config, std::ios::trunc);
    out << "global:\n"
           "  scrape_interval: 1s\n"
           "  evaluation_interval: 1s\n"
           "scrape_configs:\n"
           "  - job_name: ringleader\n"
           "    static_configs:\n"
           "      - targets: ['127.0.0.1:"
        << metrics_port << "']\n";
    ASSERT_TRUE(out.good());
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> prometheus = ChildProcess::Start(
      {kPrometheus, "--config.file=" + config,
       "--storage.tsdb.path=" + (tmp / "prometheus-data").string(),
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port)},
      (tmp / "prometheus.log").string());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  PrometheusQueries prom(prometheus_port);
  auto context = [&] {
    return absl::StrCat("\nlast error: ", prom.last_error, "\nlast answer: ", prom.last_answer,
                        "\n", cluster.LogTails());
  };

  ASSERT_TRUE(cluster.WaitForState(*job, v1::JOB_STATE_RUNNING, absl::Seconds(20)).ok())
      << cluster.LogTails();
  // Prometheus reached the target, and saw the job running with both ranks stepping.
  absl::Status seen = WaitUntil(
      [&] {
        return prom.Equals("up{job=\"ringleader\"}", 1) &&
               prom.Equals("ringleader_jobs{state=\"running\"}", 1) &&
               prom.Equals(absl::StrCat("count(ringleader_rank_step{job_id=\"", *job,
                                        "\"} > 0)"),
                           2);
      },
      absl::Seconds(20), "Prometheus shows job running with 2 ranks stepping");
  ASSERT_TRUE(seen.ok()) << seen << context();

  auto busy = prom.Query("ringleader_workers{state=\"busy\"}");
  ASSERT_TRUE(busy.has_value()) << context();
  ASSERT_EQ(busy->size(), 1u) << context();
  EXPECT_EQ((*busy)[0].second, 2);
  EXPECT_EQ((*busy)[0].first.at("instance"), absl::StrCat("127.0.0.1:", metrics_port));
  auto reports = prom.Query(
      "sum(ringleader_rpcs_total{method=\"ReportProgress\",code=\"OK\"})");
  ASSERT_TRUE(reports.has_value() && reports->size() == 1) << context();
  EXPECT_GT((*reports)[0].second, 0);
  auto latency = prom.Query(
      "sum(ringleader_rpc_duration_seconds_count{method=\"ReportProgress\"})");
  ASSERT_TRUE(latency.has_value() && latency->size() == 1) << context();
  EXPECT_GT((*latency)[0].second, 0);
  auto rank_series = prom.Query(absl::StrCat("ringleader_rank_loss{job_id=\"", *job, "\"}"));
  ASSERT_TRUE(rank_series.has_value()) << context();
  ASSERT_EQ(rank_series->size(), 2u) << context();
  for (const auto& [labels, value] : *rank_series) {
    EXPECT_TRUE(labels.count("rank")) << context();
    EXPECT_EQ(labels.at("job"), "ringleader") << "the scrape job's label is Prometheus's own";
  }

  // After a cancel the next scrapes show it.
  const CliResult cancelled = cluster.RunCli({"cancel", *job}, absl::Seconds(10));
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  seen = WaitUntil(
      [&] {
        return prom.Equals("ringleader_jobs{state=\"cancelled\"}", 1) &&
               prom.Equals("ringleader_jobs{state=\"running\"}", 0);
      },
      absl::Seconds(10), "Prometheus shows the job cancelled");
  EXPECT_TRUE(seen.ok()) << seen << context();

  // The coordinator's log names the address it serves metrics on.
  std::ifstream log(fs::path(cluster.dir()) / "coordinator-0.log");
  const std::string log_text((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
  EXPECT_THAT(log_text, ::testing::HasSubstr(absl::StrCat(
                            "serving metrics on http://127.0.0.1:", metrics_port, "/metrics")));

  (*prometheus)->Terminate(absl::Seconds(5));
  const ExitInfo exit = (*prometheus)->Wait();
  EXPECT_TRUE(exit.success()) << "prometheus " << exit.Describe();
  std::cout << "metrics e2e: " << absl::FormatDuration(absl::Now() - test_start) << std::endl;
}

TEST(MetricsE2eTest, AMetricsPortInUseStopsTheStartNamingTheFlag) {
  // A port held by a listening socket of this process.
  const int held = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(held, 1), 0);
  ASSERT_EQ(getsockname(held, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  const std::string log = (fs::path(std::getenv("TEST_TMPDIR")) / "in-use.log").string();
  absl::StatusOr<std::unique_ptr<ChildProcess>> coordinator =
      ChildProcess::Start({RunfilePath("coordinator/ringleader-coordinator"),
                           "--listen=127.0.0.1:0", "--insecure",
                           absl::StrCat("--http_listen=127.0.0.1:", port)},
                          log);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const ExitInfo exit = (*coordinator)->Wait();
  close(held);
  EXPECT_EQ(exit.exit_code, 1) << exit.Describe();
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(output, ::testing::HasSubstr(absl::StrCat(
                          "--http_listen: UNAVAILABLE: could not listen on 127.0.0.1:", port)));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
