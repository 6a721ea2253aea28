// SqliteJobStore on real files, what only SQLite has: a second coordinator on the same
// directory, a corrupt or foreign or newer file refused untouched, an unwritable directory, the
// migration from schema 1. The JobStore contract itself is job_store_conformance_test.
#include "coordinator/store/sqlite_job_store.h"

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "coordinator/store/job_store.h"
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


}  // namespace
}  // namespace ringleader
