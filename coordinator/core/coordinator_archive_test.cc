// Coordinator core: finished jobs kept (options.max_finished_jobs_kept). Beyond the limit the
// finished jobs that ended first are archived: out of memory, into the job store's archive,
// still readable (GetJob, WatchJob, ListJobsPage with include_archived); queued and running
// jobs never are; a restarted coordinator applies the limit to what it loads and never reuses
// an archived job's id. Fake clock, in-memory store.
#include <memory>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "coordinator/rpc/rpc_handler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using CapturedLogs = Captured<absl::StatusOr<v1::GetLogsResponse>>;

std::vector<std::string> Ids(const std::vector<v1::JobStatus>& jobs) {
  std::vector<std::string> ids;
  for (const v1::JobStatus& job : jobs) ids.push_back(job.job_id());
  return ids;
}

std::vector<std::string> Ids(const absl::StatusOr<std::vector<v1::JobStatus>>& jobs) {
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  return jobs.ok() ? Ids(*jobs) : std::vector<std::string>();
}

bool Logged(const std::vector<std::string>& log, const std::string& text) {
  for (const std::string& line : log) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

class ArchiveTest : public CoordinatorTest {
 protected:
  static constexpr size_t kKept = 2;

  ArchiveTest() : CoordinatorTest(KeepTwo()) {}

  static CoordinatorOptions KeepTwo() {
    CoordinatorOptions options = Options();
    options.max_finished_jobs_kept = kKept;
    return options;
  }

  // Takes `worker`'s assignment (a 1-rank job), joins it and returns its attempt.
  AttemptId Start(const WorkerId& worker) {
    std::vector<v1::Assignment> assignments = TakeAndJoin({worker});
    EXPECT_EQ(assignments.size(), 1u);
    return AttemptOf(assignments[0]);
  }

  // The attempt's only rank finishes: ok (the job SUCCEEDS) or not (it FAILS, or restarts).
  void Finish(const AttemptId& attempt, bool ok = true) {
    Coordinator::RankOutcome outcome;
    outcome.ok = ok;
    if (!ok) outcome.error = "boom";
    ASSERT_TRUE(coordinator_.FinishRank(attempt, Rank(0), outcome).ok());
  }

  // The jobs in memory, oldest first.
  std::vector<std::string> InMemory() { return Ids(coordinator_.ListJobs()); }

  // Every page of ListJobsPage, `limit` jobs a page.
  std::vector<v1::JobStatus> ListAll(bool include_archived, size_t limit) {
    std::vector<v1::JobStatus> all;
    std::string after;
    for (int pages = 0; pages < 20; ++pages) {
      absl::StatusOr<Coordinator::JobsPage> page =
          coordinator_.ListJobsPage(after, limit, include_archived);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(page->jobs.size(), limit);
      for (v1::JobStatus& job : page->jobs) all.push_back(std::move(job));
      if (!page->more) break;
      after = all.back().job_id();
    }
    return all;
  }
};

// Jobs end in the order job-2, job-3, job-1, job-4 (not their submission order): with 2 kept,
// the 3rd and 4th ends archive job-2 and job-3, the two that ended first.
TEST_F(ArchiveTest, FinishingFourJobsArchivesTheTwoThatEndedFirst) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId one = Submit(1);
  const AttemptId one_attempt = Start(a);
  const JobId two = Submit(1);
  const AttemptId two_attempt = Start(b);

  clock_.Advance(absl::Seconds(1));
  Finish(two_attempt);  // ends first
  const JobId three = Submit(1);
  const AttemptId three_attempt = Start(b);
  clock_.Advance(absl::Seconds(1));
  Finish(three_attempt);
  EXPECT_THAT(InMemory(), ElementsAre(one.value(), two.value(), three.value()));
  clock_.Advance(absl::Seconds(1));
  Finish(one_attempt);  // 3 finished > 2 kept: job-2 goes
  EXPECT_THAT(InMemory(), ElementsAre(one.value(), three.value()));
  EXPECT_TRUE(Logged(log_, "archived job job-000002 (the 2 most recently finished jobs stay in "
                           "memory: --jobs_kept)"));

  const JobId four = Submit(1);
  const AttemptId four_attempt = Start(a);
  clock_.Advance(absl::Seconds(1));
  Finish(four_attempt);
  EXPECT_THAT(InMemory(), ElementsAre(one.value(), four.value()));

  // The store moved them to its archive with their final status.
  EXPECT_THAT(Ids(store_.LoadAll()), ElementsAre(one.value(), four.value()));
  EXPECT_THAT(Ids(store_.ListArchived(0, 10)), ElementsAre(two.value(), three.value()));
  absl::StatusOr<v1::JobStatus> archived = store_.LoadArchived(two.value());
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_EQ(archived->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_FALSE(archived->archived()) << "the flag is for answers, not the store's record";
  EXPECT_EQ(coordinator_.Metrics().jobs_archived, 2u);
  EXPECT_EQ(coordinator_.Metrics().jobs_by_state.at(v1::JOB_STATE_SUCCEEDED), 2);
}

TEST_F(ArchiveTest, QueuedAndRunningJobsAreNeverArchived) {
  const WorkerId a = Register("a");
  const JobId running = Submit(1);
  Start(a);
  const JobId queued = Submit(5);  // more ranks than workers: waits
  std::vector<JobId> cancelled;
  for (int i = 0; i < 4; ++i) {
    cancelled.push_back(Submit(1));  // behind `queued` (strict FIFO)
  }
  for (const JobId& job : cancelled) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(coordinator_.CancelJob(job, "not needed").ok());
  }
  EXPECT_THAT(InMemory(), ElementsAre(running.value(), queued.value(), cancelled[2].value(),
                                      cancelled[3].value()));
  EXPECT_EQ(Job(running).state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(Job(queued).state(), v1::JOB_STATE_QUEUED);
  EXPECT_FALSE(Job(running).archived());
  EXPECT_EQ(coordinator_.Metrics().jobs_archived, 2u);

  // Once they end they count like the others: the running one is the newest to end.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(coordinator_.CancelJob(queued, "").ok());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(coordinator_.CancelJob(running, "").ok());
  EXPECT_THAT(InMemory(), ElementsAre(running.value(), queued.value()));
}

TEST_F(ArchiveTest, AnArchivedJobStillAnswersItsFinalStatus) {
  const WorkerId a = Register("a");
  const JobId first = Submit(1);
  const AttemptId attempt = Start(a);
  ASSERT_TRUE(coordinator_.AppendLogs(attempt, Rank(0), 0, "hello\n").ok());
  Finish(attempt, /*ok=*/false);
  const v1::JobStatus final_status = Job(first);
  ASSERT_EQ(final_status.state(), v1::JOB_STATE_FAILED);
  for (int i = 0; i < 2; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(coordinator_.CancelJob(Submit(1), "").ok());
  }
  ASSERT_THAT(InMemory(), ElementsAre("job-000002", "job-000003"));

  // GetJob: the final status, from the store, marked archived.
  absl::StatusOr<v1::JobStatus> got = coordinator_.GetJob(first);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->archived());
  EXPECT_EQ(got->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(got->version(), final_status.version());
  EXPECT_EQ(got->transitions_size(), final_status.transitions_size());
  EXPECT_THAT(got->transitions().rbegin()->reason(), HasSubstr("boom"));

  // WatchJob answers at once with it, whatever version the caller has.
  CapturedJob watched;
  coordinator_.WatchJobAsync(first, got->version() + 10, clock_.Now() + absl::Seconds(30),
                             watched.Callback());
  ASSERT_EQ(watched.calls(), 1);
  ASSERT_TRUE(watched.value().ok()) << watched.value().status();
  EXPECT_TRUE(watched.value()->archived());
  EXPECT_EQ(watched.value()->state(), v1::JOB_STATE_FAILED);

  // What was kept in memory only is gone, and the answers say so.
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = coordinator_.GetJobMetrics(first);
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(metrics.status().message()),
              HasSubstr("job-000001 ended and was archived"));
  EXPECT_THAT(std::string(metrics.status().message()), HasSubstr("--jobs_kept"));
  CapturedLogs logs;
  coordinator_.GetLogsAsync(first, {}, clock_.Now(), logs.Callback());
  ASSERT_EQ(logs.calls(), 1);
  EXPECT_EQ(logs.value().status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(logs.value().status().message()), HasSubstr("its output is no longer"));

  // The ranks' late messages are told the job ended; a cancel too.
  EXPECT_EQ(coordinator_.AppendLogs(attempt, Rank(0), 6, "late\n").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_.FinishRank(attempt, Rank(0), {}).code(),
            absl::StatusCode::kFailedPrecondition);
  absl::Status cancel = coordinator_.CancelJob(first, "");
  EXPECT_EQ(cancel.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(cancel.message()), HasSubstr("already ended (it was archived"));

  // An id never handed out is still unknown.
  EXPECT_EQ(coordinator_.GetJob(JobId("job-000099")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.GetJobMetrics(JobId("job-000099")).status().message(),
            "unknown job job-000099");
}

TEST_F(ArchiveTest, ParkedWatchesAndLogReadsAreAnsweredWhenTheirJobIsArchived) {
  const WorkerId a = Register("a");
  const JobId first = Submit(1);
  const AttemptId attempt = Start(a);
  ASSERT_TRUE(coordinator_.AppendLogs(attempt, Rank(0), 0, "hello\n").ok());
  Finish(attempt);
  const uint64_t version = Job(first).version();
  CapturedJob watched;
  coordinator_.WatchJobAsync(first, version, clock_.Now() + absl::Seconds(30),
                             watched.Callback());
  CapturedLogs logs;
  Coordinator::LogsQuery past_the_bytes;
  past_the_bytes.after[0] = 6;
  // The attempt ended less than log_linger ago: the read waits for late output.
  coordinator_.GetLogsAsync(first, past_the_bytes, clock_.Now() + absl::Seconds(30),
                            logs.Callback());
  EXPECT_EQ(watched.calls(), 0);
  EXPECT_EQ(logs.calls(), 0);

  ASSERT_TRUE(coordinator_.CancelJob(Submit(1), "").ok());
  ASSERT_TRUE(coordinator_.CancelJob(Submit(1), "").ok());  // same time: job-000001 is older
  ASSERT_THAT(InMemory(), ElementsAre("job-000002", "job-000003"));
  ASSERT_EQ(watched.calls(), 1);
  ASSERT_TRUE(watched.value().ok());
  EXPECT_TRUE(watched.value()->archived());
  EXPECT_EQ(watched.value()->state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(logs.calls(), 1);
  ASSERT_TRUE(logs.value().ok()) << logs.value().status();
  EXPECT_TRUE(logs.value()->attempt_over());
  EXPECT_TRUE(logs.value()->job_over());
  EXPECT_EQ(logs.value()->chunks_size(), 0);
}

TEST_F(ArchiveTest, ListJobsShowsArchivedJobsOnlyWhenAskedInPagesInIdOrder) {
  std::vector<JobId> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(Submit(9));  // queued: no worker
  for (int i : {3, 0, 4, 1}) {  // ends job-4, job-1, job-5, job-2: job-4 and job-1 archived
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(coordinator_.CancelJob(jobs[i], "").ok());
  }
  EXPECT_THAT(InMemory(), ElementsAre("job-000002", "job-000003", "job-000005"));

  EXPECT_THAT(Ids(ListAll(/*include_archived=*/false, 500)),
              ElementsAre("job-000002", "job-000003", "job-000005"));
  for (size_t limit : {1, 2, 3, 500}) {
    const std::vector<v1::JobStatus> all = ListAll(/*include_archived=*/true, limit);
    ASSERT_THAT(Ids(all), ElementsAre("job-000001", "job-000002", "job-000003", "job-000004",
                                      "job-000005"))
        << "pages of " << limit;
    EXPECT_TRUE(all[0].archived());
    EXPECT_FALSE(all[1].archived());
    EXPECT_FALSE(all[2].archived());
    EXPECT_TRUE(all[3].archived());
    EXPECT_EQ(all[3].state(), v1::JOB_STATE_CANCELLED);
    EXPECT_FALSE(all[4].archived());
  }
  // A page may start after an archived job (the job was archived between two pages).
  absl::StatusOr<Coordinator::JobsPage> after_archived =
      coordinator_.ListJobsPage("job-000001", 1, /*include_archived=*/false);
  ASSERT_TRUE(after_archived.ok()) << after_archived.status();
  EXPECT_THAT(Ids(after_archived->jobs), ElementsAre("job-000002"));
  EXPECT_TRUE(after_archived->more);
  EXPECT_EQ(coordinator_.ListJobsPage("job-000042", 1, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_.ListJobsPage("nonsense", 1, true).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Through the handler: include_archived and page tokens.
  RpcHandler handler(&coordinator_);
  v1::ListJobsRequest request;
  request.set_page_size(2);
  request.set_include_archived(true);
  std::vector<std::string> listed;
  int pages = 0;
  do {
    v1::ListJobsResponse page;
    ASSERT_TRUE(handler.ListJobs(request, &page).ok());
    for (const v1::JobStatus& job : page.jobs()) {
      listed.push_back(job.archived() ? job.job_id() + " (archived)" : job.job_id());
    }
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(listed, ElementsAre("job-000001 (archived)", "job-000002", "job-000003",
                                  "job-000004 (archived)", "job-000005"));
  v1::ListJobsRequest forged;
  forged.set_page_token("job-999999");
  v1::ListJobsResponse refused;
  EXPECT_EQ(handler.ListJobs(forged, &refused).code(), absl::StatusCode::kInvalidArgument);
  v1::GetJobRequest get;
  get.set_job_id("job-000004");
  v1::GetJobResponse got;
  ASSERT_TRUE(handler.GetJob(get, &got).ok());
  EXPECT_TRUE(got.job().archived());
}

TEST_F(ArchiveTest, RestartsOfArchivedJobsStayCounted) {
  const WorkerId a = Register("a");
  const JobId flaky = Submit(1, "gloo", /*max_restarts=*/1);
  Finish(Start(a), /*ok=*/false);  // restarts after the backoff
  Advance(absl::Seconds(1));
  Finish(Start(a));
  ASSERT_EQ(Job(flaky).restarts(), 1u);
  ASSERT_EQ(coordinator_.Metrics().restarts, 1u);
  ASSERT_TRUE(coordinator_.CancelJob(Submit(1), "").ok());
  ASSERT_TRUE(coordinator_.CancelJob(Submit(1), "").ok());
  ASSERT_TRUE(coordinator_.GetJob(flaky)->archived());
  EXPECT_EQ(coordinator_.Metrics().restarts, 1u);  // a counter: never goes down
}

// A coordinator restarted on the store: the limit applies to what it loads, archived jobs stay
// out of memory, and new ids continue after archived ones too.
TEST_F(ArchiveTest, ARestartedCoordinatorAppliesTheLimitAndNeverReusesAnArchivedId) {
  // A first coordinator that kept everything: 4 finished jobs, one queued.
  InMemoryJobStore store;
  {
    Coordinator first(Options(), &clock_, &store);
    std::vector<JobId> jobs;
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<Coordinator::Submitted> submitted = first.SubmitJob([] {
        v1::JobSpec spec;
        spec.set_world_size(9);
        return spec;
      }());
      ASSERT_TRUE(submitted.ok()) << submitted.status();
      jobs.push_back(submitted->id);
    }
    for (int i : {4, 2, 0, 1}) {  // ends job-5, job-3, job-1, job-2; job-4 stays queued
      clock_.Advance(absl::Seconds(1));
      ASSERT_TRUE(first.CancelJob(jobs[i], "").ok());
    }
  }
  absl::StatusOr<std::vector<v1::JobStatus>> saved = store.LoadAll();
  ASSERT_TRUE(saved.ok());
  ASSERT_EQ(saved->size(), 5u);

  Coordinator second(KeepTwo(), &clock_, &store);
  ASSERT_TRUE(second.Restore(std::move(*saved)).ok());
  EXPECT_THAT(Ids(second.ListJobs()), ElementsAre("job-000001", "job-000002", "job-000004"));
  EXPECT_THAT(Ids(store.LoadAll()), ElementsAre("job-000001", "job-000002", "job-000004"));
  EXPECT_THAT(Ids(store.ListArchived(0, 10)), ElementsAre("job-000003", "job-000005"));
  absl::StatusOr<v1::JobStatus> archived = second.GetJob(JobId("job-000005"));
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_TRUE(archived->archived());
  EXPECT_EQ(archived->state(), v1::JOB_STATE_CANCELLED);

  // A third start loads only what is not archived; job-000005 (archived, the highest number)
  // is never handed out again.
  saved = store.LoadAll();
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->size(), 3u);
  Coordinator third(KeepTwo(), &clock_, &store);
  ASSERT_TRUE(third.Restore(std::move(*saved)).ok());
  v1::JobSpec spec;
  spec.set_world_size(1);
  absl::StatusOr<Coordinator::Submitted> next = third.SubmitJob(spec);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->id.value(), "job-000006");
  EXPECT_TRUE(third.GetJob(JobId("job-000003"))->archived());
}

// A Save of a job that lands after its archiving (saves run outside the lock, in any order)
// does not bring it back among the saved jobs.
TEST(InMemoryJobStoreTest, ASaveAfterTheArchiveChangesNothing) {
  InMemoryJobStore store;
  v1::JobStatus job;
  job.set_job_id("job-000007");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_version(5);
  ASSERT_TRUE(store.Archive(job).ok());
  v1::JobStatus stale = job;
  stale.set_version(4);
  stale.set_state(v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(store.Save(stale).ok());
  EXPECT_TRUE(store.LoadAll()->empty());
  EXPECT_EQ(store.LoadArchived("job-000007")->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(store.LoadArchived("job-000008").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store.HighestArchivedNumber(), 7u);
  EXPECT_EQ(store.Archive(v1::JobStatus()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
