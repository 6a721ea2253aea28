// The JobStore contract, on every implementation (job_store_conformance.h): round trip in
// job-number order across reopening, newest version wins (also from racing threads), the
// archive (never brought back by a late Save, ordered and paged by job number, the highest
// number), and a Coordinator restarted on the store that restores its jobs with ids that never
// repeat.
#include "coordinator/store/job_store_conformance.h"

#include <string>
#include <thread>
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

v1::JobStatus Job(const std::string& id, uint64_t version, v1::JobState state) {
  v1::JobStatus job;
  job.set_job_id(id);
  job.set_version(version);
  job.set_state(state);
  job.mutable_spec()->set_name("saved");
  v1::Alarm* alarm = job.add_alarms();
  alarm->set_kind(v1::Alarm::DRIFT);
  alarm->set_tensor("fc1.weight");
  return job;
}

TEST_P(JobStoreConformance, SavedJobsComeBackInIdOrderAfterReopening) {
  {
    std::shared_ptr<JobStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Save(Job("job-000010", 1, v1::JOB_STATE_QUEUED)).ok());
    ASSERT_TRUE(store->Save(Job("job-000002", 3, v1::JOB_STATE_SUCCEEDED)).ok());
    ASSERT_TRUE(store->Save(Job("job-000010", 2, v1::JOB_STATE_RUNNING)).ok());
  }
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  auto jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id(), "job-000002");  // by number, not by text or insertion
  EXPECT_EQ((*jobs)[1].job_id(), "job-000010");
  EXPECT_EQ((*jobs)[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ((*jobs)[1].alarms(0).tensor(), "fc1.weight");
}

TEST_P(JobStoreConformance, AnOlderVersionNeverReplacesANewerOne) {
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Save(Job("job-000001", 5, v1::JOB_STATE_FAILED)).ok());
  ASSERT_TRUE(store->Save(Job("job-000001", 4, v1::JOB_STATE_RUNNING)).ok());
  auto jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].state(), v1::JOB_STATE_FAILED);
}

// A coordinator restarted on the same store: every job is back, a job that was running is
// failed with the reason, queued jobs are queued again, and new ids continue.
TEST_P(JobStoreConformance, ARestartedCoordinatorKeepsItsJobsAndNeverRepeatsAnId) {
  FakeClock clock;
  {
    std::shared_ptr<JobStore> store = Open();
    ASSERT_NE(store, nullptr);
    Coordinator first(CoordinatorOptions(), &clock, store.get());
    v1::Device cpu;
    cpu.set_kind("cpu");
    ASSERT_TRUE(first.RegisterWorker("a", "host-a", {cpu}, 1).ok());
    v1::JobSpec one;
    one.set_world_size(1);
    ASSERT_TRUE(first.SubmitJob(one).ok());  // job-000001: assigned to "a"
    v1::JobSpec two;
    two.set_world_size(2);
    ASSERT_TRUE(first.SubmitJob(two).ok());  // job-000002: waits for a second worker
  }
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  auto saved = store->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 2u);
  EXPECT_EQ((*saved)[0].state(), v1::JOB_STATE_RENDEZVOUS);
  Coordinator second(CoordinatorOptions(), &clock, store.get());
  ASSERT_TRUE(second.Restore(std::move(*saved)).ok());
  auto first_job = second.GetJob(JobId("job-000001"));
  ASSERT_TRUE(first_job.ok());
  // The running job lost its attempt with the old coordinator; it has restarts left (the
  // default 3), so it waits to be placed again as generation 2.
  EXPECT_EQ(first_job->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(first_job->restarts(), 1u);
  EXPECT_THAT(first_job->transitions().rbegin()->reason(),
              HasSubstr("the coordinator restarted while generation 1 was in RENDEZVOUS"));
  EXPECT_EQ(second.GetJob(JobId("job-000002"))->state(), v1::JOB_STATE_QUEUED);
  v1::JobSpec three;
  three.set_world_size(1);
  auto submitted = second.SubmitJob(three);
  ASSERT_TRUE(submitted.ok());
  EXPECT_EQ(submitted->id.value(), "job-000003");
  // The restart of job-000001 was saved too.
  auto reloaded = store->LoadAll();
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ((*reloaded)[0].state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ((*reloaded)[0].restarts(), 1u);
  EXPECT_EQ(reloaded->size(), 3u);
}

TEST_P(JobStoreConformance, AnArchivedJobLeavesLoadAllAndKeepsItsFinalStatusAcrossReopening) {
  {
    std::shared_ptr<JobStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Save(Job("job-000001", 2, v1::JOB_STATE_SUCCEEDED)).ok());
    ASSERT_TRUE(store->Save(Job("job-000002", 4, v1::JOB_STATE_RUNNING)).ok());
    ASSERT_TRUE(store->Save(Job("job-000010", 1, v1::JOB_STATE_QUEUED)).ok());
    // The final status comes with the archive (its last Save may not have landed yet).
    ASSERT_TRUE(store->Archive(Job("job-000002", 5, v1::JOB_STATE_FAILED)).ok());
    ASSERT_TRUE(store->Archive(Job("job-000001", 2, v1::JOB_STATE_SUCCEEDED)).ok());
    // A save made before the archive, landing after it: the job stays archived, as it ended.
    ASSERT_TRUE(store->Save(Job("job-000002", 5, v1::JOB_STATE_FAILED)).ok());
    ASSERT_TRUE(store->Save(Job("job-000002", 3, v1::JOB_STATE_RUNNING)).ok());
    // Archiving again never goes back to an older version.
    ASSERT_TRUE(store->Archive(Job("job-000002", 4, v1::JOB_STATE_RUNNING)).ok());
  }
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  auto saved = store->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].job_id(), "job-000010");

  auto archived = store->LoadArchived("job-000002");
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_EQ(archived->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(archived->version(), 5u);
  EXPECT_EQ(archived->alarms(0).tensor(), "fc1.weight");
  EXPECT_EQ(store->LoadArchived("job-000010").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->LoadArchived("job-000099").status().code(), absl::StatusCode::kNotFound);

  auto page = store->ListArchived(0, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].job_id(), "job-000001");
  EXPECT_EQ((*page)[1].job_id(), "job-000002");
  page = store->ListArchived(1, 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].job_id(), "job-000002");
  page = store->ListArchived(0, 1);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size(), 1u);
  EXPECT_EQ(*store->HighestArchivedNumber(), 2u);
  EXPECT_EQ(store->Archive(Job("not-a-job", 1, v1::JOB_STATE_FAILED)).code(),
            absl::StatusCode::kInvalidArgument);
}

// A coordinator keeping 1 finished job: the others move to the archive; restarted on the same
// directory it loads only the kept one, still answers the archived ones from the store, and
// never hands out an archived job's id again (job-000003, the highest, was archived).
TEST_P(JobStoreConformance, ARestartedCoordinatorReadsArchivedJobsFromTheStore) {
  FakeClock clock;
  CoordinatorOptions options;
  options.max_finished_jobs_kept = 1;
  v1::JobSpec spec;
  spec.set_world_size(2);  // no worker: every job waits until cancelled
  {
    std::shared_ptr<JobStore> store = Open();
    ASSERT_NE(store, nullptr);
    Coordinator first(options, &clock, store.get());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(first.SubmitJob(spec).ok());
    for (const char* id : {"job-000003", "job-000002", "job-000001"}) {
      clock.Advance(absl::Seconds(1));
      ASSERT_TRUE(first.CancelJob(JobId(id), "").ok());
    }
    // job-000001 ended last: kept; job-000004 is still queued.
    EXPECT_EQ(first.ListJobs().size(), 2u);
    auto archived = first.GetJob(JobId("job-000003"));
    ASSERT_TRUE(archived.ok()) << archived.status();
    EXPECT_TRUE(archived->archived());
  }
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  auto saved = store->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 2u);
  EXPECT_EQ((*saved)[0].job_id(), "job-000001");
  EXPECT_EQ((*saved)[1].job_id(), "job-000004");

  Coordinator second(options, &clock, store.get());
  ASSERT_TRUE(second.Restore(std::move(*saved)).ok());
  auto archived = second.GetJob(JobId("job-000002"));
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_TRUE(archived->archived());
  EXPECT_EQ(archived->state(), v1::JOB_STATE_CANCELLED);
  auto page = second.ListJobsPage("", 10, /*include_archived=*/true);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->jobs.size(), 4u);
  EXPECT_FALSE(page->jobs[0].archived());
  EXPECT_TRUE(page->jobs[1].archived());
  EXPECT_TRUE(page->jobs[2].archived());
  EXPECT_FALSE(page->jobs[3].archived());
  auto submitted = second.SubmitJob(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->id.value(), "job-000005");
}

// Saves of one job from several threads, in no particular order: the highest version stays.
TEST_P(JobStoreConformance, RacingSavesKeepTheHighestVersion) {
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t v = 1 + t; v <= 40; v += 4) {
        EXPECT_TRUE(store->Save(Job("job-000007", v, v1::JOB_STATE_RUNNING)).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].version(), 40u);
}

TEST_P(JobStoreConformance, ArchivePagesAreByNumberAndAnEmptyPageIsEmpty) {
  std::shared_ptr<JobStore> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->HighestArchivedNumber(), 0u);
  EXPECT_TRUE(store->ListArchived(0, 10)->empty());
  for (const char* id : {"job-000100", "job-000009", "job-000010", "job-1000000"}) {
    ASSERT_TRUE(store->Archive(Job(id, 1, v1::JOB_STATE_SUCCEEDED)).ok()) << id;
  }
  EXPECT_EQ(*store->HighestArchivedNumber(), 1000000u);
  auto page = store->ListArchived(9, 2);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].job_id(), "job-000010");
  EXPECT_EQ((*page)[1].job_id(), "job-000100");
  page = store->ListArchived(100, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].job_id(), "job-1000000");
  EXPECT_TRUE(store->ListArchived(0, 0)->empty());
  EXPECT_TRUE(store->ListArchived(1000000, 10)->empty());
  EXPECT_EQ(store->LoadArchived("job-000009")->job_id(), "job-000009");
  EXPECT_EQ(store->LoadArchived("job-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(store->LoadArchived("job-000011").status().message()),
              HasSubstr("job-000011"));
}

}  // namespace

std::string JobStoreConformanceName(
    const ::testing::TestParamInfo<JobStoreBackendFactory>& info) {
  return info.param.name;
}

void JobStoreConformance::SetUp() {
  const std::string test_name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  // "Suite/Name/Param" → a name usable in paths and keys.
  std::string safe;
  for (char c : test_name) safe += (c == '/') ? '_' : c;
  backend_ = GetParam().make(safe);
  ASSERT_NE(backend_, nullptr);
}

std::shared_ptr<JobStore> JobStoreConformance::Open() {
  absl::StatusOr<std::shared_ptr<JobStore>> store = backend_->Open();
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *store : nullptr;
}

}  // namespace ringleader
