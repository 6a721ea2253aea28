// A real scrape checked by Prometheus's own linter: the coordinator core with workers, a
// running job with step reports and an alarm, calls through the RPC handler (counted), served
// by HttpServer's /metrics route as CoordinatorServer wires it, fetched over HTTP and fed to
// `promtool check metrics` (Debian package prometheus; this test fails without it).
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator_test_util.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/prometheus_text.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/rpc_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr char kPromtool[] = "/usr/bin/promtool";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class MetricsPromtoolTest : public CoordinatorTest {
 protected:
  // A coordinator with something in every family: workers in two states, a running job whose
  // ranks reported 40 steps (a straggler alarm after two windows, drift), a queued job, RPCs with two codes.
  void Populate() {
    v1::RegisterWorkerResponse registered;
    std::vector<std::string> workers;
    for (const char* name : {"a", "b", "c"}) {
      v1::RegisterWorkerRequest request;
      request.set_name(name);
      request.add_devices()->set_kind("cpu");
      request.set_incarnation(1);
      ASSERT_TRUE(handler_.RegisterWorker(request, &registered).ok());
      workers.push_back(registered.worker_id());
    }
    v1::SubmitJobRequest submit;
    submit.mutable_spec()->set_name("scraped");
    submit.mutable_spec()->set_world_size(2);
    v1::SubmitJobResponse submitted;
    ASSERT_TRUE(handler_.SubmitJob(submit, &submitted).ok());
    for (int rank = 0; rank < 2; ++rank) {
      v1::WaitAssignmentRequest wait;
      wait.set_worker_id(workers[rank]);
      wait.set_incarnation(1);
      v1::WaitAssignmentResponse assignment;
      handler_.WaitAssignment(wait, &assignment, [](absl::Status s) { ASSERT_TRUE(s.ok()); });
      ASSERT_TRUE(assignment.has_assignment());
      v1::JoinJobRequest join;
      join.set_job_id(assignment.assignment().job_id());
      join.set_generation(assignment.assignment().generation());
      join.set_rank(assignment.assignment().rank());
      join.set_worker_id(workers[rank]);
      join.set_spec_fingerprint(assignment.assignment().spec_fingerprint());
      v1::JoinJobResponse joined;
      ASSERT_TRUE(handler_.JoinJob(join, &joined).ok());
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      v1::ReportProgressRequest progress;
      progress.set_job_id(submitted.job_id());
      progress.set_generation(1);
      progress.set_rank(rank);
      for (uint64_t s = 1; s <= 40; ++s) {
        v1::StepReport* step = progress.add_steps();
        step->set_step(s);
        step->set_loss(1.0 / static_cast<double>(s));
        step->set_local_grad_norm(1 + rank);
        step->set_synced_grad_norm(1.5);
        step->set_collectives(2);
        step->set_collective_digest(9);
        step->set_compute_ms(rank == 0 ? 2 : 40);
        step->set_comm_ms(rank == 0 ? 8 : 1);
        step->set_step_ms(step->compute_ms() + step->comm_ms());
        step->set_has_drift(s % 4 == 0);
      }
      v1::ReportProgressResponse answer;
      ASSERT_TRUE(handler_.ReportProgress(progress, &answer).ok());
      ASSERT_FALSE(answer.stop()) << answer.stop_reason();
    }
    submit.mutable_spec()->set_world_size(9);  // more ranks than workers: stays queued
    ASSERT_TRUE(handler_.SubmitJob(submit, &submitted).ok());
    v1::HeartbeatRequest beat;
    beat.set_worker_id("w-404");
    v1::HeartbeatResponse beat_response;
    ASSERT_EQ(handler_.Heartbeat(beat, &beat_response).code(), absl::StatusCode::kNotFound);
  }

  RpcStats stats_;
  RpcHandler handler_{&coordinator_, &stats_};
};

TEST_F(MetricsPromtoolTest, AScrapeOfABusyCoordinatorPassesPromtoolCheckMetrics) {
  ASSERT_EQ(access(kPromtool, X_OK), 0)
      << kPromtool << " is missing: install Debian's prometheus package (deploy/setup.sh)";
  Populate();
  if (HasFatalFailure()) return;

  HttpRouter router;
  ASSERT_TRUE(AddMetricsRoute(&router, [this] {
                return CoordinatorMetricsText(coordinator_.Metrics(), stats_.Take());
              }).ok());
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1:0", std::move(router));
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  httplib::Result scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  ASSERT_EQ(scrape->status, 200);
  const std::string& page = scrape->body;
  // The scrape holds every kind of series promtool is to judge.
  for (const char* expected : {
           "ringleader_workers{state=\"busy\"} 2\n", "ringleader_jobs{state=\"running\"} 1\n",
           "ringleader_jobs{state=\"queued\"} 1\n", "ringleader_alarms{kind=\"straggler\"} 1\n",
           "ringleader_heartbeats_received_total 1\n",
           "ringleader_rank_step{job_id=\"job-000001\",rank=\"1\"} 40\n",
           "ringleader_rank_drift{job_id=\"job-000001\",rank=\"0\"} 0\n",
           "ringleader_rank_straggler_flagged{job_id=\"job-000001\",rank=\"1\"} 1\n",
           "ringleader_rpcs_total{method=\"ReportProgress\",code=\"OK\"} 2\n",
           "ringleader_rpcs_total{method=\"Heartbeat\",code=\"NOT_FOUND\"} 1\n",
           "ringleader_rpc_duration_seconds_bucket{method=\"JoinJob\",code=\"OK\",le=\"+Inf\"} 2\n",
       }) {
    EXPECT_THAT(page, HasSubstr(expected));
  }

  const std::string file =
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "scrape.txt").string();
  {
    std::ofstream out(file, std::ios::trunc);
    out << page;
    ASSERT_TRUE(out.good());
  }
  const CommandResult checked =
      RunShell(absl::StrCat(kPromtool, " check metrics < '", file, "'"));
  EXPECT_EQ(checked.exit_code, 0) << "promtool check metrics:\n" << checked.output
                                  << "\nthe scrape:\n" << page;
  EXPECT_EQ(checked.output, "") << "promtool's lint findings";
}

// The checker itself rejects what it should (so the test above can fail).
TEST_F(MetricsPromtoolTest, PromtoolRejectsACounterWithoutTotalAndHelp) {
  ASSERT_EQ(access(kPromtool, X_OK), 0)
      << kPromtool << " is missing: install Debian's prometheus package (deploy/setup.sh)";
  const std::string file =
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "bad.txt").string();
  {
    std::ofstream out(file, std::ios::trunc);
    out << "# TYPE ringleader_heartbeats counter\nringleader_heartbeats 1\n";
  }
  const CommandResult checked =
      RunShell(absl::StrCat(kPromtool, " check metrics < '", file, "'"));
  EXPECT_NE(checked.exit_code, 0);
  EXPECT_THAT(checked.output, HasSubstr("_total"));
}

}  // namespace
}  // namespace ringleader
