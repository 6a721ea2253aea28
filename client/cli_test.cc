#include "client/cli.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "client/mock_job_client.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Return;
using ::testing::StartsWith;
using ::testing::StrictMock;

// Hands the factory's caller a client that forwards to the test's mock.
class ForwardingJobClient : public JobClient {
 public:
  explicit ForwardingJobClient(JobClient* target) : target_(target) {}
  absl::StatusOr<v1::SubmitJobResponse> Submit(const v1::JobSpec& spec) override {
    return target_->Submit(spec);
  }
  absl::StatusOr<v1::GetJobResponse> Get(const std::string& id) override {
    return target_->Get(id);
  }
  absl::StatusOr<v1::WatchJobResponse> Watch(const std::string& id, uint64_t after,
                                             absl::Duration wait) override {
    return target_->Watch(id, after, wait);
  }
  absl::StatusOr<v1::ListJobsResponse> List(bool include_archived) override {
    return target_->List(include_archived);
  }
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers() override { return target_->ListWorkers(); }
  absl::StatusOr<v1::CancelJobResponse> Cancel(const std::string& id,
                                               const std::string& reason) override {
    return target_->Cancel(id, reason);
  }
  absl::StatusOr<v1::GetJobMetricsResponse> GetJobMetrics(const std::string& id) override {
    return target_->GetJobMetrics(id);
  }
  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& request) override {
    return target_->GetLogs(request);
  }
  absl::StatusOr<v1::DebugJobResponse> Debug(const std::string& job_id,
                                             uint32_t wait_ms) override {
    return target_->Debug(job_id, wait_ms);
  }

 private:
  JobClient* target_;
};

class CliTest : public ::testing::Test {
 protected:
  CliTest() {
    env_.out = &out_;
    env_.default_tls_dir = "certs";  // as $RINGLEADER_TLS_DIR would give it
    env_.err = &err_;
    env_.clock = &clock_;
    env_.sleep = [](absl::Duration) {};
    env_.read_file = [](const std::string&) -> absl::StatusOr<std::string> {
      return absl::NotFoundError("no files in this test");
    };
  }

  int Run(std::vector<std::string> args) {
    return RunCli(args, env_, [this](const ConnectOptions& options) {
      ++connects_;
      address_ = options.address;
      timeout_ = options.call_timeout;
      connect_options_ = options;
      return std::make_unique<ForwardingJobClient>(&client_);
    });
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  CommandEnvironment env_;
  int connects_ = 0;
  std::string address_;
  absl::Duration timeout_;
  ConnectOptions connect_options_;
};

TEST_F(CliTest, HelpForProgramAndEachCommand) {
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_EQ(out_.str(), CliUsage());
  EXPECT_THAT(out_.str(), StartsWith("usage: ringleader [global flags] <command>"));
  for (const char* command :
       {"submit", "status", "watch", "list", "workers", "cancel", "metrics", "export"}) {
    out_.str("");
    EXPECT_EQ(Run({command, "--help"}), kExitOk) << command;
    EXPECT_THAT(out_.str(), StartsWith(std::string("usage: ringleader ") + command));
    EXPECT_THAT(out_.str(), HasSubstr("--coordinator ADDR"));
  }
  EXPECT_EQ(connects_, 0);
}

TEST_F(CliTest, UsageErrorsExitTwoWithUsage) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("error: no command given"));
  err_.str("");
  EXPECT_EQ(Run({"stauts", "j-1"}), kExitUsage);
  EXPECT_THAT(err_.str(), StartsWith("error: unknown command 'stauts' (did you mean 'status'?)"));
  EXPECT_THAT(err_.str(), HasSubstr("usage: ringleader [global flags]"));
  err_.str("");
  EXPECT_EQ(Run({"submit", "--epoch", "3"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown flag --epoch for 'submit'"));
  EXPECT_THAT(err_.str(), HasSubstr("usage: ringleader submit [flags] [SPEC.yaml]"));
  err_.str("");
  EXPECT_EQ(Run({"status"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("'status' takes JOB, got none"));
  err_.str("");
  EXPECT_EQ(Run({"--timeout", "soon", "list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--timeout: expected a positive duration"));
  err_.str("");
  EXPECT_EQ(Run({"submit", "--set", "nonsense"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--set: expected KEY.PATH=VALUE"));
  EXPECT_EQ(connects_, 0);
}

TEST_F(CliTest, GlobalFlagsReachTheFactory) {
  EXPECT_CALL(client_, List(false)).WillOnce(Return(v1::ListJobsResponse()));
  EXPECT_EQ(Run({"--coordinator", "head:7000", "list", "--timeout=2.5"}), kExitOk);
  EXPECT_EQ(address_, "head:7000");
  EXPECT_EQ(timeout_, absl::Milliseconds(2500));
  EXPECT_EQ(out_.str(), "no jobs\n");

  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(v1::ListWorkersResponse()));
  EXPECT_EQ(Run({"workers", "--timeout", "500ms"}), kExitOk);
  EXPECT_EQ(address_, kDefaultCoordinator);
  EXPECT_EQ(timeout_, absl::Milliseconds(500));
}

TEST_F(CliTest, CoordinatorListAndItsDefaultFromTheEnvironment) {
  EXPECT_CALL(client_, List(false)).WillRepeatedly(Return(v1::ListJobsResponse()));
  EXPECT_EQ(Run({"--coordinator", "a:7070, b:7070", "list"}), kExitOk);
  EXPECT_EQ(address_, "a:7070, b:7070");  // the list as given: the client parses it

  env_.default_coordinator = "c:7070,d:7070";  // as $RINGLEADER_COORDINATOR would give it
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(address_, "c:7070,d:7070");
  EXPECT_EQ(Run({"--coordinator=e:7070", "list"}), kExitOk);
  EXPECT_EQ(address_, "e:7070");

  const int connects = connects_;
  EXPECT_EQ(Run({"--coordinator", "a:7070,,b:7070", "list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("error: --coordinator: "));
  EXPECT_THAT(err_.str(), HasSubstr("host:port[,host:port...]"));
  EXPECT_EQ(connects_, connects);
}

TEST_F(CliTest, ListArchivedAsksForTheArchivedJobsToo) {
  v1::ListJobsResponse jobs;
  v1::JobStatus* old = jobs.add_jobs();
  old->set_job_id("job-000001");
  old->set_state(v1::JOB_STATE_SUCCEEDED);
  old->set_archived(true);
  v1::JobStatus* recent = jobs.add_jobs();
  recent->set_job_id("job-000002");
  recent->set_state(v1::JOB_STATE_FAILED);
  EXPECT_CALL(client_, List(true)).WillOnce(Return(jobs));
  EXPECT_EQ(Run({"list", "--archived"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("job-000001  -     SUCCEEDED (archived)"));
  EXPECT_THAT(out_.str(), HasSubstr("job-000002  -     FAILED "));
  EXPECT_CALL(client_, List(false)).WillOnce(Return(v1::ListJobsResponse()));
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(Run({"list", "--archived=yes"}), kExitUsage);
  out_.str("");
  EXPECT_EQ(Run({"list", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--archived"));
}

TEST_F(CliTest, SubmitFlagsBecomeSpecFields) {
  v1::JobSpec sent;
  EXPECT_CALL(client_, Submit(_)).WillOnce([&](const v1::JobSpec& spec) {
    sent = spec;
    v1::SubmitJobResponse response;
    response.set_job_id("j-1");
    return response;
  });
  EXPECT_EQ(Run({"submit", "--world_size", "4", "--epochs=2", "--lr", "0.01", "--batch_size", "32",
                 "--max_steps", "100", "--name", "quick", "--backend", "gloo", "--set",
                 "sync.overlap=false", "--set", "model.layers=[784, 32, 10]"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(sent.world_size(), 4u);
  EXPECT_EQ(sent.epochs(), 2u);
  EXPECT_DOUBLE_EQ(sent.optimizer().learning_rate(), 0.01);
  EXPECT_EQ(sent.batch_size(), 32u);
  EXPECT_EQ(sent.max_steps(), 100u);
  EXPECT_EQ(sent.name(), "quick");
  EXPECT_FALSE(sent.sync().overlap());
  EXPECT_EQ(sent.model().layers_size(), 3);
  EXPECT_THAT(out_.str(), HasSubstr("submitted job j-1"));
}

TEST_F(CliTest, SubmitMissingSpecFileIsUsageError) {
  EXPECT_EQ(Run({"submit", "nope.yaml"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("cannot read spec file nope.yaml"));
}

TEST_F(CliTest, CancelStatusAndWatchDispatch) {
  EXPECT_CALL(client_, Cancel("j-2", "cancelled from the command line"))
      .WillOnce(Return(v1::CancelJobResponse()));
  EXPECT_CALL(client_, Cancel("j-3", "wrong data")).WillOnce(Return(v1::CancelJobResponse()));
  EXPECT_CALL(client_, Get("j-4")).WillOnce(Return(absl::NotFoundError("no job j-4")));
  v1::WatchJobResponse done;
  done.mutable_job()->set_state(v1::JOB_STATE_CANCELLED);
  done.mutable_job()->set_version(1);
  EXPECT_CALL(client_, Watch("j-5", 0, _)).WillOnce(Return(done));
  EXPECT_EQ(Run({"cancel", "j-2"}), kExitOk);
  EXPECT_EQ(Run({"cancel", "j-3", "--reason", "wrong data"}), kExitOk);
  EXPECT_EQ(Run({"status", "j-4"}), kExitFailure);
  EXPECT_EQ(Run({"watch", "j-5"}), kExitFailure);  // CANCELLED is not SUCCEEDED
  EXPECT_THAT(out_.str(),
              HasSubstr("result: not judged yet (0 steps judged): the job ended CANCELLED\n"));
}

TEST_F(CliTest, MetricsHelpAndUsageErrors) {
  EXPECT_EQ(Run({"metrics", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: ringleader metrics [flags] JOB\n"));
  EXPECT_THAT(out_.str(), HasSubstr("step, rank, loss, local_grad_norm"));
  EXPECT_THAT(out_.str(), HasSubstr("decimated"));
  EXPECT_THAT(out_.str(), HasSubstr("--format csv|json"));
  EXPECT_THAT(out_.str(), HasSubstr("-o, --output FILE"));
  EXPECT_EQ(Run({"metrics"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("'metrics' takes JOB, got none"));
  EXPECT_THAT(err_.str(), HasSubstr("usage: ringleader metrics [flags] JOB"));
  err_.str("");
  EXPECT_EQ(Run({"metrics", "j-1", "--format", "xml"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: --format: expected csv or json, got 'xml'\n");
  err_.str("");
  EXPECT_EQ(Run({"metrics", "j-1", "-o"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("flag --output needs a value: --output FILE"));
  err_.str("");
  EXPECT_EQ(Run({"metrics", "j-1", "--output="}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--output: expected a file name"));
  err_.str("");
  EXPECT_EQ(Run({"metrics", "j-1", "--formt", "csv"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown flag --formt for 'metrics' (did you mean 'format'?)"));
  err_.str("");
  EXPECT_EQ(Run({"export", "j-1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("export: -o FILE (--output) is required"));
  EXPECT_EQ(connects_, 0);
}

TEST_F(CliTest, MetricsDispatchesWithFormatAndOutput) {
  v1::GetJobMetricsResponse metrics;
  metrics.set_job_id("j-6");
  metrics.set_generation(1);
  v1::MetricsPoint* point = metrics.add_points();
  point->set_step(4);
  point->set_loss(0.5);
  EXPECT_CALL(client_, GetJobMetrics("j-6")).Times(2).WillRepeatedly(Return(metrics));
  EXPECT_EQ(Run({"metrics", "j-6"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "step,rank,loss,local_grad_norm,synced_grad_norm,drift,step_ms,compute_ms,comm_ms,"
            "samples_per_second\n4,0,0.5,0,0,,0,0,0,0\n");
  out_.str("");
  const std::string path = ::testing::TempDir() + "cli_metrics.json";
  EXPECT_EQ(Run({"metrics", "--format=json", "j-6", "-o", path}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "wrote 1 point (steps 4..4, generation 1) to " + path + "\n");
}

TEST_F(CliTest, TlsComesFromTlsDirOrItsDefaultAndInsecureIsExplicit) {
  EXPECT_CALL(client_, List(false)).WillRepeatedly(Return(v1::ListJobsResponse()));
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(connect_options_.tls_dir, "certs");
  EXPECT_FALSE(connect_options_.insecure);
  EXPECT_EQ(Run({"--tls_dir", "/etc/ringleader/tls", "list"}), kExitOk);
  EXPECT_EQ(connect_options_.tls_dir, "/etc/ringleader/tls");
  EXPECT_EQ(Run({"--insecure", "list"}), kExitOk);
  EXPECT_TRUE(connect_options_.insecure);
  EXPECT_EQ(connect_options_.tls_dir, "");
  const int connects = connects_;
  EXPECT_EQ(Run({"--insecure", "--tls_dir", "x", "list"}), kExitUsage);
  env_.default_tls_dir = "";
  EXPECT_EQ(Run({"list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--tls_dir: the coordinator speaks TLS"));
  EXPECT_EQ(connects_, connects);  // refused before connecting
}

TEST_F(CliTest, TheTokenComesFromTokenFileOrItsDefault) {
  EXPECT_CALL(client_, List(false)).WillRepeatedly(Return(v1::ListJobsResponse()));
  env_.default_token = "from-the-environment-0123";
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(connect_options_.token, "from-the-environment-0123");
  env_.read_file = [](const std::string& path) -> absl::StatusOr<std::string> {
    if (path == "tok") return std::string("  from-the-file-0123456789\n");
    if (path == "empty") return std::string("\n");
    return absl::NotFoundError("no such file");
  };
  EXPECT_EQ(Run({"--token_file", "tok", "list"}), kExitOk);
  EXPECT_EQ(connect_options_.token, "from-the-file-0123456789");
  const int connects = connects_;
  EXPECT_EQ(Run({"--token_file", "missing", "list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--token_file: cannot read missing"));
  EXPECT_EQ(Run({"--token_file", "empty", "list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--token_file: empty is empty"));
  EXPECT_EQ(connects_, connects);
}

}  // namespace
}  // namespace ringleader
