// CoordinatorServer started as ringleader-coordinator starts it: a durable job store and an
// attempt secret under a state directory that a later start finds again, a second coordinator
// on the same directory refused, /metrics (counting the gRPC calls) and the dashboard over
// HTTP, and the part named when a start fails. Every gRPC call carries a deadline.
#include "coordinator/server/coordinator_server.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/server/coordinator_instance.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : ".") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A worker registered and a 1-rank job submitted and assigned to it, through the core.
v1::Assignment AssignOneRankJob(Coordinator& coordinator) {
  v1::Device cpu;
  cpu.set_kind("cpu");
  absl::StatusOr<Coordinator::Registration> worker =
      coordinator.RegisterWorker("w", "host-w", {cpu}, 1);
  EXPECT_TRUE(worker.ok()) << worker.status();
  v1::JobSpec spec;
  spec.set_name("kept");
  spec.set_world_size(1);
  EXPECT_TRUE(coordinator.SubmitJob(spec).ok());
  std::optional<v1::Assignment> assignment;
  coordinator.WaitAssignmentAsync(worker->id, absl::Now(),
                                  [&](absl::StatusOr<std::optional<v1::Assignment>> answer) {
                                    if (answer.ok() && answer->has_value()) assignment = **answer;
                                  });
  EXPECT_TRUE(assignment.has_value());
  return assignment.value_or(v1::Assignment());
}

CoordinatorServerOptions DurableOptions(const std::string& state_dir,
                                        std::vector<std::string>* log = nullptr) {
  CoordinatorServerOptions options;
  options.instance.state_dir = state_dir;
  options.instance.attempt_tokens = true;
  if (log != nullptr) {
    options.instance.log = [log](absl::Time, const std::string& line) { log->push_back(line); };
  }
  return options;
}

TEST(CoordinatorServerTest, JobsAndAttemptTokensSurviveARestartOnTheSameStateDir) {
  const std::string dir = FreshDir("restart");
  std::vector<std::string> log;
  v1::Assignment assignment;
  {
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> first =
        CoordinatorServer::Start(DurableOptions(dir, &log));
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_NE((*first)->attempt_tokens(), nullptr);
    assignment = AssignOneRankJob((*first)->coordinator());
    EXPECT_FALSE(assignment.attempt_token().empty());
    (*first)->Shutdown(absl::Now() + absl::Seconds(2));
  }
  EXPECT_THAT(log, testing::Contains(absl::StrCat("job store: ", dir, "/coordinator.db")));

  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second =
      CoordinatorServer::Start(DurableOptions(dir));
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<v1::JobStatus> job = (*second)->coordinator().GetJob(JobId(assignment.job_id()));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec().name(), "kept");
  EXPECT_EQ((*second)->attempt_tokens()->For(assignment.job_id(), assignment.generation()),
            assignment.attempt_token());
}

TEST(CoordinatorServerTest, ASecondServerOnTheSameStateDirFailsAtTheJobStore) {
  const std::string dir = FreshDir("second");
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> first =
      CoordinatorServer::Start(DurableOptions(dir));
  ASSERT_TRUE(first.ok()) << first.status();
  CoordinatorPart failed = CoordinatorPart::kHttpServer;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second =
      CoordinatorServer::Start(DurableOptions(dir), &failed);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(failed, CoordinatorPart::kJobStore);
  EXPECT_THAT(second.status().message(), HasSubstr("is in use by another coordinator"));
}

TEST(CoordinatorServerTest, HttpServesMetricsCountingGrpcCallsAndTheDashboard) {
  std::vector<std::string> log;
  CoordinatorServerOptions options;
  options.http_listen = "127.0.0.1:0";
  options.instance.log = [&log](absl::Time, const std::string& line) { log.push_back(line); };
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string http = (*server)->http_address();
  ASSERT_THAT(http, HasSubstr("127.0.0.1:"));
  EXPECT_THAT(log, testing::Contains(absl::StrCat("serving metrics on http://", http, "/metrics")));
  EXPECT_THAT(log, testing::Contains(absl::StrCat("serving the dashboard on http://", http, "/")));

  auto workers = v1::WorkerService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::RegisterWorkerRequest request;
  request.set_name("node1-cpu0");
  request.add_devices()->set_kind("cpu");
  v1::RegisterWorkerResponse response;
  ASSERT_TRUE(workers->RegisterWorker(&context, request, &response).ok());

  httplib::Client client("http://" + http);
  client.set_read_timeout(10, 0);
  httplib::Result scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape) << "no answer from " << http;
  EXPECT_EQ(scrape->status, 200);
  EXPECT_THAT(scrape->body, HasSubstr("ringleader_rpcs_total{method=\"RegisterWorker\","
                                      "code=\"OK\"} 1\n"));
  // The dashboard's API goes through an uncounted handler.
  httplib::Result workers_page = client.Get("/api/workers");
  ASSERT_TRUE(workers_page);
  EXPECT_EQ(workers_page->status, 200);
  EXPECT_THAT(workers_page->body, HasSubstr("node1-cpu0"));
  scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_THAT(scrape->body, testing::Not(HasSubstr("ListWorkers")));
  httplib::Result page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->get_header_value("Content-Type"), HasSubstr("text/html"));
}

TEST(CoordinatorServerTest, NoHttpListenNoHttpServer) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(CoordinatorServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->http_address(), "");
  EXPECT_GT((*server)->port(), 0);
}

TEST(CoordinatorServerTest, AFailedStartNamesThePart) {
  CoordinatorPart failed = CoordinatorPart::kJobStore;
  CoordinatorServerOptions bad_listen;
  bad_listen.listen = "no-port";
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(std::move(bad_listen), &failed);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed, CoordinatorPart::kGrpcServer);

  CoordinatorServerOptions bad_http;
  bad_http.http_listen = "no-port";
  server = CoordinatorServer::Start(std::move(bad_http), &failed);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed, CoordinatorPart::kHttpServer);
}

}  // namespace
}  // namespace ringleader
