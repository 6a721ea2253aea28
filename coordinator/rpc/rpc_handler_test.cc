// RpcHandler: requests become core calls (wait_timeout_ms → deadline on the coordinator's
// clock) and results become responses. No transport.
#include "coordinator/rpc/rpc_handler.h"

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

class RpcHandlerTest : public CoordinatorTest {
 protected:
  RpcHandler handler_{&coordinator_};
};

TEST_F(RpcHandlerTest, RegisterAnswersIdAndLeaseTimes) {
  v1::RegisterWorkerRequest request;
  request.set_name("n");
  request.add_devices()->set_kind("cuda");
  v1::RegisterWorkerResponse response;
  ASSERT_TRUE(handler_.RegisterWorker(request, &response).ok());
  EXPECT_EQ(response.worker_id(), "w-1");
  EXPECT_EQ(response.heartbeat_interval_ms(), 2000u);
  EXPECT_EQ(response.heartbeat_timeout_ms(), 10000u);
  request.clear_devices();
  EXPECT_EQ(handler_.RegisterWorker(request, &response).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RpcHandlerTest, RegisterPassesTheTopologyOn) {
  v1::RegisterWorkerRequest request;
  request.set_name("n");
  request.set_host("machine");
  request.set_topology("rack7/node3");
  request.add_devices()->set_kind("cpu");
  v1::RegisterWorkerResponse response;
  ASSERT_TRUE(handler_.RegisterWorker(request, &response).ok());
  EXPECT_EQ(Worker(WorkerId(response.worker_id())).topology(), "rack7/node3");
  request.set_name("m");
  request.set_topology("rack 7/node3");
  const absl::Status bad = handler_.RegisterWorker(request, &response);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("topology"));
}

TEST_F(RpcHandlerTest, WaitTimeoutBecomesADeadlineOnTheCoordinatorClock) {
  const WorkerId worker = Register("a");
  v1::WaitAssignmentRequest request;
  request.set_worker_id(worker.value());
  request.set_wait_timeout_ms(1500);
  v1::WaitAssignmentResponse response;
  int calls = 0;
  absl::Status status = absl::UnknownError("not called");
  handler_.WaitAssignment(request, &response, [&](absl::Status s) {
    ++calls;
    status = s;
  });
  Advance(absl::Milliseconds(1499));
  EXPECT_EQ(calls, 0);
  Advance(absl::Milliseconds(1));
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(status.ok());
  EXPECT_FALSE(response.has_assignment());
}

TEST_F(RpcHandlerTest, SubmitThenAssignmentAndProgressResponses) {
  const WorkerId worker = Register("a");
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_world_size(1);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(handler_.SubmitJob(submit, &submitted).ok());
  EXPECT_EQ(submitted.spec_fingerprint().size(), 16u);

  v1::WaitAssignmentRequest wait;
  wait.set_worker_id(worker.value());
  v1::WaitAssignmentResponse assigned;
  absl::Status status = absl::UnknownError("not called");
  handler_.WaitAssignment(wait, &assigned, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok());
  ASSERT_TRUE(assigned.has_assignment());
  EXPECT_EQ(assigned.assignment().spec_fingerprint(), submitted.spec_fingerprint());

  v1::CancelJobRequest cancel;
  cancel.set_job_id(submitted.job_id());
  cancel.set_reason("operator");
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(handler_.CancelJob(cancel, &cancelled).ok());

  v1::ReportProgressRequest report;
  report.set_job_id(submitted.job_id());
  report.set_generation(assigned.assignment().generation());
  report.set_rank(0);
  v1::ReportProgressResponse progress;
  ASSERT_TRUE(handler_.ReportProgress(report, &progress).ok());
  EXPECT_TRUE(progress.stop());
  EXPECT_THAT(progress.stop_reason(), testing::HasSubstr("operator"));

  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker.value());
  heartbeat.set_incarnation(1);
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(handler_.Heartbeat(heartbeat, &beat).ok());
  ASSERT_EQ(beat.abort_size(), 1);
  EXPECT_EQ(beat.abort(0).job_id(), submitted.job_id());

  v1::ListJobsResponse jobs;
  ASSERT_TRUE(handler_.ListJobs(v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_CANCELLED);
}

// Logs: an AppendLogsRequest becomes an append, a GetLogsRequest's rank, generation and cursors
// a query; ReportProgress answers how many steps were judged.
TEST_F(RpcHandlerTest, LogsRequestsAndStepsJudged) {
  const WorkerId worker = Register("a");
  const JobId job = Submit(1);
  std::vector<v1::Assignment> assignments = TakeAndJoin({worker});
  v1::AppendLogsRequest append;
  append.set_job_id(job.value());
  append.set_generation(1);
  append.set_rank(0);
  append.set_offset(0);
  append.set_data("hello\nworld\n");
  v1::AppendLogsResponse appended;
  ASSERT_TRUE(handler_.AppendLogs(append, &appended).ok());
  append.set_generation(2);
  EXPECT_EQ(handler_.AppendLogs(append, &appended).code(), absl::StatusCode::kFailedPrecondition);

  v1::GetLogsRequest get;
  get.set_job_id(job.value());
  get.set_rank(0);
  v1::LogCursor* cursor = get.add_after();
  cursor->set_rank(0);
  cursor->set_offset(6);
  v1::GetLogsResponse logs;
  absl::Status status = absl::UnknownError("not called");
  handler_.GetLogs(get, &logs, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(logs.generation(), 1u);
  ASSERT_EQ(logs.chunks_size(), 1);
  EXPECT_EQ(logs.chunks(0).offset(), 6u);
  EXPECT_EQ(logs.chunks(0).data(), "world\n");
  get.set_rank(1);
  status = absl::UnknownError("not called");
  handler_.GetLogs(get, &logs, [&](absl::Status s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);

  v1::ReportProgressRequest report;
  report.set_job_id(job.value());
  report.set_generation(1);
  report.set_rank(0);
  report.add_steps()->set_step(1);
  v1::ReportProgressResponse progress;
  ASSERT_TRUE(handler_.ReportProgress(report, &progress).ok());
  EXPECT_EQ(progress.steps_judged(), 1u);
}

TEST_F(RpcHandlerTest, ListJobsAndWorkersComeInPagesThatTogetherHoldEveryOneOnce) {
  for (int i = 0; i < 5; ++i) Register(absl::StrCat("w", i));
  for (int i = 0; i < 7; ++i) Submit(9);  // queued: more ranks than workers
  std::vector<std::string> ids;
  v1::ListJobsRequest request;
  request.set_page_size(3);
  int pages = 0;
  do {
    v1::ListJobsResponse page;
    ASSERT_TRUE(handler_.ListJobs(request, &page).ok());
    EXPECT_LE(page.jobs_size(), 3);
    for (const v1::JobStatus& job : page.jobs()) ids.push_back(job.job_id());
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(ids, ::testing::ElementsAre("job-000001", "job-000002", "job-000003", "job-000004",
                                          "job-000005", "job-000006", "job-000007"));
  // The default page holds them all; a made-up token is refused.
  v1::ListJobsResponse all;
  ASSERT_TRUE(handler_.ListJobs(v1::ListJobsRequest(), &all).ok());
  EXPECT_EQ(all.jobs_size(), 7);
  EXPECT_EQ(all.next_page_token(), "");
  v1::ListJobsRequest forged;
  forged.set_page_token("job-999999");
  v1::ListJobsResponse refused;
  EXPECT_EQ(handler_.ListJobs(forged, &refused).code(), absl::StatusCode::kInvalidArgument);

  v1::ListWorkersRequest workers;
  workers.set_page_size(2);
  std::vector<std::string> names;
  do {
    v1::ListWorkersResponse page;
    ASSERT_TRUE(handler_.ListWorkers(workers, &page).ok());
    for (const v1::WorkerStatus& worker : page.workers()) names.push_back(worker.name());
    workers.set_page_token(page.next_page_token());
  } while (!workers.page_token().empty() && names.size() < 20);
  EXPECT_THAT(names, ::testing::ElementsAre("w0", "w1", "w2", "w3", "w4"));
}

}  // namespace
}  // namespace ringleader
