// SqliteJobStore on real files: round trip, newest version wins, a second coordinator on the
// same directory, a corrupt or foreign or newer file refused untouched, and a Coordinator that
// restores its jobs with ids that never repeat.
#include "coordinator/store/sqlite_job_store.h"

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class SqliteJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(std::getenv("TEST_TMPDIR")) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name())
               .string();
    fs::remove_all(dir_);
  }

  static v1::JobStatus Job(const std::string& id, uint64_t version, v1::JobState state) {
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

  std::string dir_;
};

TEST_F(SqliteJobStoreTest, SavedJobsComeBackInIdOrderAfterReopening) {
  {
    auto store = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Save(Job("job-000010", 1, v1::JOB_STATE_QUEUED)).ok());
    ASSERT_TRUE((*store)->Save(Job("job-000002", 3, v1::JOB_STATE_SUCCEEDED)).ok());
    ASSERT_TRUE((*store)->Save(Job("job-000010", 2, v1::JOB_STATE_RUNNING)).ok());
  }
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = (*store)->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id(), "job-000002");  // by number, not by text or insertion
  EXPECT_EQ((*jobs)[1].job_id(), "job-000010");
  EXPECT_EQ((*jobs)[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ((*jobs)[1].alarms(0).tensor(), "fc1.weight");
}

TEST_F(SqliteJobStoreTest, AnOlderVersionNeverReplacesANewerOne) {
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Save(Job("job-000001", 5, v1::JOB_STATE_FAILED)).ok());
  ASSERT_TRUE((*store)->Save(Job("job-000001", 4, v1::JOB_STATE_RUNNING)).ok());
  auto jobs = (*store)->LoadAll();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].state(), v1::JOB_STATE_FAILED);
}

TEST_F(SqliteJobStoreTest, ASecondCoordinatorOnTheSameDirectoryIsRefused) {
  auto first = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = SqliteJobStore::Open(dir_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("in use by another coordinator (pid "));
  first->reset();
  EXPECT_TRUE(SqliteJobStore::Open(dir_).ok()) << "the lock goes with the first store";
}

TEST_F(SqliteJobStoreTest, ACorruptFileIsRefusedAndLeftUntouched) {
  fs::create_directories(dir_);
  const std::string db = (fs::path(dir_) / "coordinator.db").string();
  const std::string garbage(4096, 'x');
  std::ofstream(db, std::ios::binary) << garbage;
  auto store = SqliteJobStore::Open(dir_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("corrupt or not a database"));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("left untouched"));
  EXPECT_EQ(ReadAll(db), garbage);
}

TEST_F(SqliteJobStoreTest, ANewerSchemaAndAForeignDatabaseAreRefused) {
  fs::create_directories(dir_);
  const std::string db_path = (fs::path(dir_) / "coordinator.db").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE schema_version(version INTEGER);"
                         "INSERT INTO schema_version VALUES(99);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto newer = SqliteJobStore::Open(dir_);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(newer.status().message()), HasSubstr("newer ringleader (schema 99"));

  fs::remove(db_path);
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER);", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto foreign = SqliteJobStore::Open(dir_);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(foreign.status().message()), HasSubstr("not a ringleader"));
}

TEST_F(SqliteJobStoreTest, AnUnwritableStateDirIsAClearError) {
  auto store = SqliteJobStore::Open("/proc/ringleader-state");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("--state_dir /proc/ringleader-state"));
}

// A coordinator restarted on the same store: every job is back, a job that was running is
// failed with the reason, queued jobs are queued again, and new ids continue.
TEST_F(SqliteJobStoreTest, ARestartedCoordinatorKeepsItsJobsAndNeverRepeatsAnId) {
  FakeClock clock;
  {
    auto store = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    Coordinator first(CoordinatorOptions(), &clock, store->get());
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
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto saved = (*store)->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 2u);
  EXPECT_EQ((*saved)[0].state(), v1::JOB_STATE_RENDEZVOUS);
  Coordinator second(CoordinatorOptions(), &clock, store->get());
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
  auto reloaded = (*store)->LoadAll();
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ((*reloaded)[0].state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ((*reloaded)[0].restarts(), 1u);
  EXPECT_EQ(reloaded->size(), 3u);
}

TEST_F(SqliteJobStoreTest, AnArchivedJobLeavesLoadAllAndKeepsItsFinalStatusAcrossReopening) {
  {
    auto store = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Save(Job("job-000001", 2, v1::JOB_STATE_SUCCEEDED)).ok());
    ASSERT_TRUE((*store)->Save(Job("job-000002", 4, v1::JOB_STATE_RUNNING)).ok());
    ASSERT_TRUE((*store)->Save(Job("job-000010", 1, v1::JOB_STATE_QUEUED)).ok());
    // The final status comes with the archive (its last Save may not have landed yet).
    ASSERT_TRUE((*store)->Archive(Job("job-000002", 5, v1::JOB_STATE_FAILED)).ok());
    ASSERT_TRUE((*store)->Archive(Job("job-000001", 2, v1::JOB_STATE_SUCCEEDED)).ok());
    // A save made before the archive, landing after it: the job stays archived, as it ended.
    ASSERT_TRUE((*store)->Save(Job("job-000002", 5, v1::JOB_STATE_FAILED)).ok());
    ASSERT_TRUE((*store)->Save(Job("job-000002", 3, v1::JOB_STATE_RUNNING)).ok());
    // Archiving again never goes back to an older version.
    ASSERT_TRUE((*store)->Archive(Job("job-000002", 4, v1::JOB_STATE_RUNNING)).ok());
  }
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto saved = (*store)->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].job_id(), "job-000010");

  auto archived = (*store)->LoadArchived("job-000002");
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_EQ(archived->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(archived->version(), 5u);
  EXPECT_EQ(archived->alarms(0).tensor(), "fc1.weight");
  EXPECT_EQ((*store)->LoadArchived("job-000010").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->LoadArchived("job-000099").status().code(), absl::StatusCode::kNotFound);

  auto page = (*store)->ListArchived(0, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].job_id(), "job-000001");
  EXPECT_EQ((*page)[1].job_id(), "job-000002");
  page = (*store)->ListArchived(1, 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].job_id(), "job-000002");
  page = (*store)->ListArchived(0, 1);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size(), 1u);
  EXPECT_EQ(*(*store)->HighestArchivedNumber(), 2u);
  EXPECT_EQ((*store)->Archive(Job("not-a-job", 1, v1::JOB_STATE_FAILED)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteJobStoreTest, ASchemaOneDatabaseGainsTheArchiveAndKeepsItsJobs) {
  fs::create_directories(dir_);
  const std::string db_path = (fs::path(dir_) / "coordinator.db").string();
  {
    // What a version-1 coordinator wrote.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE schema_version(version INTEGER NOT NULL);"
                           "INSERT INTO schema_version VALUES(1);"
                           "CREATE TABLE jobs(id TEXT PRIMARY KEY, sequence INTEGER NOT NULL,"
                           "  version INTEGER NOT NULL, status BLOB NOT NULL);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    const std::string bytes = Job("job-000003", 7, v1::JOB_STATE_SUCCEEDED).SerializeAsString();
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO jobs VALUES('job-000003', 3, 7, ?1)", -1,
                                 &stmt, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob(stmt, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto saved = (*store)->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].version(), 7u);
  EXPECT_EQ(*(*store)->HighestArchivedNumber(), 0u);
  ASSERT_TRUE((*store)->Archive((*saved)[0]).ok());
  EXPECT_TRUE((*store)->LoadAll()->empty());
  EXPECT_EQ((*store)->LoadArchived("job-000003")->version(), 7u);
  store->reset();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), SqliteJobStore::kSchemaVersion);
  EXPECT_EQ(SqliteJobStore::kSchemaVersion, 2);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A coordinator keeping 1 finished job: the others move to archived_jobs; restarted on the same
// directory it loads only the kept one, still answers the archived ones from the database, and
// never hands out an archived job's id again (job-000003, the highest, was archived).
TEST_F(SqliteJobStoreTest, ARestartedCoordinatorReadsArchivedJobsFromTheDatabase) {
  FakeClock clock;
  CoordinatorOptions options;
  options.max_finished_jobs_kept = 1;
  v1::JobSpec spec;
  spec.set_world_size(2);  // no worker: every job waits until cancelled
  {
    auto store = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    Coordinator first(options, &clock, store->get());
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
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto saved = (*store)->LoadAll();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 2u);
  EXPECT_EQ((*saved)[0].job_id(), "job-000001");
  EXPECT_EQ((*saved)[1].job_id(), "job-000004");

  Coordinator second(options, &clock, store->get());
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

}  // namespace
}  // namespace ringleader
