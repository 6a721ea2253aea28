// Two HaCoordinators sharing one real etcd (started here): one leads and serves, the other is a
// standby that refuses every call with the leader's address, answers health probes NOT_SERVING
// and says so on /metrics; when the leader shuts down (resigning) the standby takes over with the
// jobs, the job ids and the attempt secret the first one left in etcd. And a start with etcd
// unreachable. Every gRPC call carries a deadline; waits poll a condition until a deadline.
#include "coordinator/server/ha_coordinator.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/coordinator_addresses.h"
#include "coordinator/core/attempt_tokens.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/health.grpc.pb.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr char kPrefix[] = "/ringleader-ha-test/";

// Lines logged by a coordinator, readable while it runs.
class LogLines {
 public:
  Coordinator::EventLogger Logger() {
    return [this](absl::Time, const std::string& line) {
      absl::MutexLock lock(&mu_);
      text_ += line + "\n";
    };
  }
  std::string Text() const {
    absl::MutexLock lock(&mu_);
    return text_;
  }

 private:
  mutable absl::Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
};

HaCoordinatorOptions Options(const std::string& endpoint, LogLines* log) {
  HaCoordinatorOptions options;
  options.server.listen = "127.0.0.1:0";
  options.server.http_listen = "127.0.0.1:0";
  options.server.instance.attempt_tokens = true;
  options.server.instance.log = log->Logger();
  options.etcd.endpoints = {endpoint};
  options.store.prefix = kPrefix;
  return options;
}

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

std::string LeaderHint(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kLeaderMetadataKey);
  if (it == trailers.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// Calls `condition` every 20 ms until it holds or `within` passes; whether it held.
bool Eventually(const std::function<bool()>& condition, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// grpc.health.v1 Check of `service` at `address`: "SERVING", "NOT_SERVING", ... or the error.
std::string Health(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return absl::StrCat("error ", status.error_code(), ": ", status.error_message());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

std::string Metrics(const std::string& http_address) {
  httplib::Client client("http://" + http_address);
  client.set_read_timeout(10, 0);
  httplib::Result scrape = client.Get("/metrics");
  if (!scrape) return "<no answer from " + http_address + ">";
  return scrape->body;
}

class HaCoordinatorGrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>> started =
        etcd::EtcdTestProcess::Start("ha-coordinator");
    ASSERT_TRUE(started.ok()) << started.status();
    etcd_ = started->release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(etcd_, nullptr) << "etcd did not start"; }

  // Starts a coordinator on the shared etcd.
  std::unique_ptr<HaCoordinator> StartCoordinator(LogLines* log) {
    CoordinatorPart failed = CoordinatorPart::kRestore;
    absl::StatusOr<std::unique_ptr<HaCoordinator>> started =
        HaCoordinator::Start(Options(etcd_->endpoint(), log), &failed);
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? *std::move(started) : nullptr;
  }

  static etcd::EtcdTestProcess* etcd_;
};

etcd::EtcdTestProcess* HaCoordinatorGrpcTest::etcd_ = nullptr;

TEST_F(HaCoordinatorGrpcTest, OneLeadsTheOtherRedirectsAndTakesOverWithTheJobs) {
  LogLines first_log, second_log;
  std::unique_ptr<HaCoordinator> first = StartCoordinator(&first_log);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->AwaitLeading(absl::Now() + absl::Seconds(30))) << first_log.Text();
  std::unique_ptr<HaCoordinator> second = StartCoordinator(&second_log);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->advertise(), second->advertise());

  auto second_jobs = v1::JobService::NewStub(
      grpc::CreateChannel(second->address(), grpc::InsecureChannelCredentials()));
  // The standby refuses, naming the leader once it has read the leader key.
  grpc::Status refused;
  std::string hint;
  ASSERT_TRUE(Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(&context);
        v1::ListWorkersResponse response;
        refused = second_jobs->ListWorkers(&context, v1::ListWorkersRequest(), &response);
        hint = LeaderHint(context);
        return !hint.empty();
      },
      absl::Seconds(30)))
      << refused.error_code() << ": " << refused.error_message() << "\n"
      << second_log.Text();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(hint, first->advertise());
  EXPECT_THAT(refused.error_message(), HasSubstr(first->advertise()));
  EXPECT_TRUE(first->leading());
  EXPECT_FALSE(second->leading());
  EXPECT_EQ(second->leader(), first->advertise());

  EXPECT_EQ(Health(first->address(), "ringleader.v1.JobService"), "SERVING");
  EXPECT_EQ(Health(first->address(), ""), "SERVING");
  EXPECT_EQ(Health(second->address(), "ringleader.v1.JobService"), "NOT_SERVING");
  EXPECT_EQ(Health(second->address(), ""), "NOT_SERVING");

  EXPECT_THAT(Metrics(first->http_address()), HasSubstr("\nringleader_leader 1\n"));
  EXPECT_THAT(Metrics(second->http_address()), HasSubstr("\nringleader_leader 0\n"));

  // On the leader: a worker and a 1-rank job assigned to it, with its attempt token.
  auto first_channel = grpc::CreateChannel(first->address(), grpc::InsecureChannelCredentials());
  auto first_workers = v1::WorkerService::NewStub(first_channel);
  auto first_jobs = v1::JobService::NewStub(first_channel);
  v1::RegisterWorkerResponse registered;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::RegisterWorkerRequest request;
    request.set_name("w0");
    request.set_host("host-w0");
    request.add_devices()->set_kind("cpu");
    const grpc::Status status = first_workers->RegisterWorker(&context, request, &registered);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_name("kept");
    request.mutable_spec()->set_world_size(1);
    v1::SubmitJobResponse response;
    const grpc::Status status = first_jobs->SubmitJob(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.job_id(), "job-000001");
  }
  v1::Assignment assignment;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WaitAssignmentRequest request;
    request.set_worker_id(registered.worker_id());
    request.set_wait_timeout_ms(5000);
    v1::WaitAssignmentResponse response;
    const grpc::Status status = first_workers->WaitAssignment(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_TRUE(response.has_assignment());
    assignment = response.assignment();
  }
  ASSERT_EQ(assignment.job_id(), "job-000001");
  ASSERT_FALSE(assignment.attempt_token().empty());

  // The leader shuts down and resigns: the standby takes over.
  first->Shutdown(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(second->AwaitLeading(absl::Now() + absl::Seconds(30))) << second_log.Text();
  EXPECT_THAT(Metrics(second->http_address()), HasSubstr("\nringleader_leader 1\n"));
  EXPECT_EQ(Health(second->address(), "ringleader.v1.JobService"), "SERVING");

  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetJobRequest request;
    request.set_job_id("job-000001");
    v1::GetJobResponse response;
    const grpc::Status status = second_jobs->GetJob(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.job().spec().name(), "kept");
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_world_size(1);
    v1::SubmitJobResponse response;
    const grpc::Status status = second_jobs->SubmitJob(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.job_id(), "job-000002");
  }

  // The new leader checks attempt tokens with the same secret: the token the first leader
  // minted passes its check (whatever the call's own outcome), a forged one does not.
  auto second_workers = v1::WorkerService::NewStub(
      grpc::CreateChannel(second->address(), grpc::InsecureChannelCredentials()));
  auto kv_set = [&](const std::string& token) {
    grpc::ClientContext context;
    SetDeadline(&context);
    context.AddMetadata(kAttemptTokenMetadata, token);
    v1::KvSetRequest request;
    request.set_job_id(assignment.job_id());
    request.set_generation(assignment.generation());
    request.set_key("gloo/0");
    request.set_value("address");
    v1::KvSetResponse response;
    return second_workers->KvSet(&context, request, &response);
  };
  std::string forged = assignment.attempt_token();
  forged[0] = forged[0] == 'a' ? 'b' : 'a';
  const grpc::Status with_forged = kv_set(forged);
  EXPECT_EQ(with_forged.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << with_forged.error_message();
  const grpc::Status with_minted = kv_set(assignment.attempt_token());
  EXPECT_NE(with_minted.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << with_minted.error_message();
  EXPECT_NE(with_minted.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << with_minted.error_message();

  second->Shutdown(absl::Now() + absl::Seconds(5));
}

TEST(HaCoordinatorStartTest, EtcdUnreachableFailsAtTheJobStoreNamingTheEndpoint) {
  absl::StatusOr<int> port = etcd::FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string endpoint = absl::StrCat("http://127.0.0.1:", *port);
  LogLines log;
  HaCoordinatorOptions options = Options(endpoint, &log);
  options.etcd.call_timeout = absl::Seconds(2);
  CoordinatorPart failed = CoordinatorPart::kRestore;
  absl::StatusOr<std::unique_ptr<HaCoordinator>> started =
      HaCoordinator::Start(std::move(options), &failed);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kUnavailable) << started.status();
  EXPECT_THAT(started.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", *port)));
  EXPECT_EQ(failed, CoordinatorPart::kJobStore);
}

}  // namespace
}  // namespace ringleader
