// The dashboard's routes against the coordinator core on a fake clock, through HttpRouter::Handle
// (no socket, no browser): each JSON answer parses back into the API's message and equals what
// the RPC handler answers; unknown jobs are 404 naming the job; pages and scripts are served with
// their content types, byte for byte the files in coordinator/http/dashboard/.
#include "coordinator/http/dashboard/dashboard_routes.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/core/coordinator_test_util.h"
#include "coordinator/http/dashboard/assets.h"
#include "coordinator/http/http_server.h"
#include "coordinator/rpc/rpc_handler.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

template <typename Message>
Message Parse(const std::string& json) {
  Message message;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return message;
}

class DashboardRoutesTest : public CoordinatorTest {
 protected:
  DashboardRoutesTest() { EXPECT_TRUE(AddDashboardRoutes(&handler_, &router_).ok()); }

  HttpResponse Get(const std::string& path) { return router_.Handle("GET", path); }

  // A 2-rank job that reported `steps` steps (drift at every 4th), running.
  JobId RunningJob(uint64_t steps) {
    const WorkerId a = Register("a");
    const WorkerId b = Register("b");
    const JobId job = Submit(2);
    TakeAndJoin({a, b});
    for (uint32_t rank : {0u, 1u}) {
      std::vector<v1::StepReport> reports;
      for (uint64_t s = 1; s <= steps; ++s) {
        v1::StepReport report;
        report.set_step(s);
        report.set_loss(2.0 / static_cast<double>(s));
        report.set_local_grad_norm(1.0 + rank);
        report.set_synced_grad_norm(1.5);
        report.set_collectives(2);
        report.set_collective_digest(7);
        report.set_compute_ms(3);
        report.set_comm_ms(1);
        report.set_step_ms(4);
        report.set_has_drift(s % 4 == 0);
        reports.push_back(report);
      }
      absl::StatusOr<Coordinator::StopSignal> answer =
          coordinator_.ReportProgress(AttemptId{job, Generation(1)}, Rank(rank), reports, {});
      EXPECT_TRUE(answer.ok()) << answer.status();
    }
    return job;
  }

  static void ExpectJson(const HttpResponse& response, int status) {
    EXPECT_EQ(response.status, status) << response.body;
    EXPECT_EQ(response.content_type, "application/json");
    EXPECT_THAT(response.headers, Contains(Pair("Cache-Control", "no-store")));
  }

  RpcHandler handler_{&coordinator_};
  HttpRouter router_;
};

TEST_F(DashboardRoutesTest, WorkersAreTheHandlersListWorkersAnswerAtTheFakeClocksTime) {
  Register("a");
  Register("b", "cuda");
  Advance(absl::Seconds(3));  // heartbeat age 3 s

  const HttpResponse response = Get("/api/workers");
  ExpectJson(response, 200);
  // Proto field names and enum names, 64-bit integers as strings: protobuf's own mapping.
  EXPECT_THAT(response.body, HasSubstr("\"worker_id\":"));
  EXPECT_THAT(response.body, HasSubstr("\"state\":\"WORKER_STATE_IDLE\""));
  EXPECT_THAT(response.body, HasSubstr("\"heartbeat_age_ms\":\"3000\""));
  v1::ListWorkersResponse expected;
  ASSERT_TRUE(handler_.ListWorkers(v1::ListWorkersRequest(), &expected).ok());
  const auto parsed = Parse<v1::ListWorkersResponse>(response.body);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected)) << parsed.DebugString() << "\nvs\n"
                                                            << expected.DebugString();
  ASSERT_EQ(parsed.workers_size(), 2);
  EXPECT_EQ(parsed.workers(1).devices(0).kind(), "cuda");
}

TEST_F(DashboardRoutesTest, JobsAndOneJobAreTheHandlersAnswers) {
  const JobId running = RunningJob(8);
  const JobId queued = Submit(5);  // more ranks than workers

  const HttpResponse list = Get("/api/jobs");
  ExpectJson(list, 200);
  v1::ListJobsResponse expected_list;
  ASSERT_TRUE(handler_.ListJobs(v1::ListJobsRequest(), &expected_list).ok());
  const auto jobs = Parse<v1::ListJobsResponse>(list.body);
  EXPECT_TRUE(MessageDifferencer::Equals(jobs, expected_list));
  ASSERT_EQ(jobs.jobs_size(), 2);
  EXPECT_EQ(jobs.jobs(0).job_id(), running.value());
  EXPECT_EQ(jobs.jobs(1).state(), v1::JOB_STATE_QUEUED);

  const HttpResponse one = Get(absl::StrCat("/api/jobs/", running.value()));
  ExpectJson(one, 200);
  EXPECT_THAT(one.body, HasSubstr("\"state\":\"JOB_STATE_RUNNING\""));
  const auto job = Parse<v1::GetJobResponse>(one.body);
  EXPECT_TRUE(MessageDifferencer::Equals(job.job(), Job(running)));
  EXPECT_EQ(job.job().ranks_size(), 2);
  EXPECT_EQ(job.job().ranks(1).last_step().step(), 8u);

  const auto waiting = Parse<v1::GetJobResponse>(Get("/api/jobs/" + queued.value()).body);
  EXPECT_THAT(waiting.job().queued_reason(), HasSubstr("world_size 5"));
}

TEST_F(DashboardRoutesTest, MetricsAreTheHandlersGetJobMetricsAnswer) {
  const JobId job = RunningJob(12);
  const HttpResponse response = Get(absl::StrCat("/api/jobs/", job.value(), "/metrics"));
  ExpectJson(response, 200);
  EXPECT_THAT(response.body, HasSubstr("\"step\":\"12\""));
  const auto metrics = Parse<v1::GetJobMetricsResponse>(response.body);
  v1::GetJobMetricsRequest request;
  request.set_job_id(job.value());
  v1::GetJobMetricsResponse expected;
  ASSERT_TRUE(handler_.GetJobMetrics(request, &expected).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(metrics, expected));
  EXPECT_EQ(metrics.points_size(), 24);  // 12 steps x 2 ranks
  EXPECT_EQ(metrics.generation(), 1u);
  int drift_points = 0;
  for (const v1::MetricsPoint& point : metrics.points()) drift_points += point.has_drift();
  EXPECT_EQ(drift_points, 6);  // steps 4, 8, 12 on both ranks
}

TEST_F(DashboardRoutesTest, AnUnknownJobIs404NamingIt) {
  for (const char* path : {"/api/jobs/job-000099", "/api/jobs/job-000099/metrics"}) {
    const HttpResponse response = Get(path);
    ExpectJson(response, 404);
    const auto error = Parse<google::protobuf::Struct>(response.body);
    EXPECT_EQ(error.fields().at("code").string_value(), "NOT_FOUND") << path;
    EXPECT_EQ(error.fields().at("error").string_value(), "unknown job job-000099") << path;
  }
  const HttpResponse page = Get("/job/job-000099");
  EXPECT_EQ(page.status, 404);
  EXPECT_EQ(page.content_type, "text/plain; charset=utf-8");
  EXPECT_THAT(page.body, HasSubstr("not found (HTTP 404): unknown job job-000099"));
  // Paths outside the API are the router's 404, listing what is served.
  const HttpResponse elsewhere = Get("/api/nothing");
  EXPECT_EQ(elsewhere.status, 404);
  EXPECT_THAT(elsewhere.body, HasSubstr("GET /api/jobs/{job}/metrics (GetJobMetricsResponse"));
}

TEST_F(DashboardRoutesTest, TheDebugButtonsRouteAnswersOnceEveryRankSentItsRing) {
  const JobId job = RunningJob(3);
  const AttemptId attempt{job, Generation(1)};
  const uint64_t before = coordinator_.GetJob(job)->version();
  HttpResponse response;
  std::thread request([&] { response = Get(absl::StrCat("/api/jobs/", job.value(), "/debug")); });
  // Asking the ranks moves the job's version; then each rank's next report is answered
  // "send_trace" and it sends its ring.
  absl::Notification asked;
  coordinator_.WatchJobAsync(job, before, absl::InfiniteFuture(),
                             [&](absl::StatusOr<v1::JobStatus>) { asked.Notify(); });
  asked.WaitForNotification();
  for (uint32_t rank : {0u, 1u}) {
    absl::StatusOr<Coordinator::StopSignal> answer =
        coordinator_.ReportProgress(attempt, Rank(rank), {}, {});
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_TRUE(answer->send_trace);
    v1::CollectiveTraceEntry entry;
    entry.set_sequence(7);
    entry.set_state(rank == 0 ? v1::CollectiveTraceEntry::STARTED
                              : v1::CollectiveTraceEntry::COMPLETED);
    ASSERT_TRUE(coordinator_.ReportTrace(attempt, Rank(rank), {entry}).ok());
  }
  request.join();
  ExpectJson(response, 200);
  const auto debug = Parse<v1::DebugJobResponse>(response.body);
  EXPECT_EQ(debug.report().first_sequence(), 7u);
  EXPECT_EQ(debug.report().ranks_size(), 2);
  EXPECT_THAT(debug.report().summary(), HasSubstr("rank 0 wait in it"));
  EXPECT_EQ(Get("/api/jobs/job-000099/debug").status, 404);
}

std::string ReadSource(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::ifstream in(
      absl::StrCat(srcdir ? srcdir : ".", "/ringleader/coordinator/http/dashboard/", name),
      std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(DashboardRoutesTest, PagesAndScriptsAreTheFilesWithTheirContentTypes) {
  const JobId job = Submit(1);
  struct Expected {
    std::string path;
    std::string file;
    std::string content_type;
  };
  for (const Expected& expected : std::vector<Expected>{
           {"/", "index.html", "text/html; charset=utf-8"},
           {"/job/" + job.value(), "job.html", "text/html; charset=utf-8"},
           {"/static/dashboard.js", "dashboard.js", "text/javascript; charset=utf-8"},
           {"/static/charts.js", "charts.js", "text/javascript; charset=utf-8"},
           {"/static/dashboard.css", "dashboard.css", "text/css; charset=utf-8"},
       }) {
    const HttpResponse response = Get(expected.path);
    EXPECT_EQ(response.status, 200) << expected.path;
    EXPECT_EQ(response.content_type, expected.content_type) << expected.path;
    const std::string source = ReadSource(expected.file);
    EXPECT_FALSE(source.empty()) << expected.file;
    EXPECT_TRUE(response.body == source) << expected.path << " differs from " << expected.file;
  }
  EXPECT_THAT(Get("/").body, HasSubstr("data-page=\"fleet\""));
  EXPECT_THAT(Get("/job/" + job.value()).body, HasSubstr("data-page=\"job\""));
  const HttpResponse missing = Get("/static/missing.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_THAT(missing.body, HasSubstr("no file missing.js in the dashboard"));
}

TEST_F(DashboardRoutesTest, EveryFileIsEmbeddedOnce) {
  std::vector<std::string> names;
  for (const DashboardAsset& asset : DashboardAssets()) {
    names.emplace_back(asset.name);
    EXPECT_EQ(asset.body, ReadSource(names.back())) << asset.name;
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("index.html", "job.html", "charts.js",
                                                     "dashboard.js", "dashboard.css"));
}

TEST(DashboardContentTypeTest, ByExtension) {
  EXPECT_EQ(DashboardContentType("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(DashboardContentType("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(DashboardContentType("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(DashboardContentType("a.svg"), "image/svg+xml");
  EXPECT_EQ(DashboardContentType("a.json5"), "application/octet-stream");
  EXPECT_EQ(DashboardContentType("html"), "application/octet-stream");
}

TEST_F(DashboardRoutesTest, AddingTheRoutesTwiceIsRefused) {
  EXPECT_EQ(AddDashboardRoutes(&handler_, &router_).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace ringleader
