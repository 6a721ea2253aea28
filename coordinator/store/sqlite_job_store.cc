#include "coordinator/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

// The statements that bring a schema of version v-1 to version v, in order (index v-1).
const char* const kMigrations[] = {
    // Version 1.
    "CREATE TABLE schema_version(version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES(1);"
    "CREATE TABLE jobs(id TEXT PRIMARY KEY, sequence INTEGER NOT NULL,"
    "                  version INTEGER NOT NULL, status BLOB NOT NULL);",
    // Version 2: finished jobs moved out of the coordinator's memory (JobStore::Archive).
    "CREATE TABLE archived_jobs(id TEXT PRIMARY KEY, sequence INTEGER NOT NULL,"
    "                           version INTEGER NOT NULL, status BLOB NOT NULL);"
    "CREATE INDEX archived_jobs_by_sequence ON archived_jobs(sequence);",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == SqliteJobStore::kSchemaVersion,
              "one migration per schema version");

std::string SqliteError(sqlite3* db) { return db ? sqlite3_errmsg(db) : "out of memory"; }

// Runs `sql` (no results). Errors: INTERNAL with SQLite's message.
absl::Status Exec(sqlite3* db, const std::string& sql, const std::string& what) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) == SQLITE_OK) {
    return absl::OkStatus();
  }
  std::string message = error ? error : SqliteError(db);
  sqlite3_free(error);
  return absl::UnavailableError(absl::StrCat(what, ": ", message));
}

// One text value of a one-row query; "" when there is no row.
absl::StatusOr<std::string> QueryText(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    return absl::UnavailableError(SqliteError(db));
  }
  std::string value;
  const int step = sqlite3_step(stmt);
  if (step == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    value = text ? reinterpret_cast<const char*>(text) : "";
  }
  sqlite3_finalize(stmt);
  if (step != SQLITE_ROW && step != SQLITE_DONE) return absl::UnavailableError(SqliteError(db));
  return value;
}

uint64_t SequenceOf(const std::string& job_id) { return JobNumber(job_id).value_or(0); }

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() const { return stmt_; }
  // Hands the statement over (the caller finalizes it).
  sqlite3_stmt* release() {
    sqlite3_stmt* stmt = stmt_;
    stmt_ = nullptr;
    return stmt;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Binds (id, sequence, version, status) to ?1..?4, as jobs and archived_jobs rows hold them.
void BindRecord(sqlite3_stmt* stmt, const v1::JobStatus& job, const std::string& bytes) {
  sqlite3_bind_text(stmt, 1, job.job_id().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(stmt, 2, static_cast<sqlite3_int64>(SequenceOf(job.job_id())));
  sqlite3_bind_int64(stmt, 3, static_cast<sqlite3_int64>(job.version()));
  sqlite3_bind_blob(stmt, 4, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
}

// Takes <dir>/coordinator.lock; the lock file holds the owner's pid for the error message.
absl::StatusOr<int> LockStateDir(const std::string& dir) {
  const std::string lock_path = (fs::path(dir) / "coordinator.lock").string();
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("--state_dir ", dir, ": cannot open ",
                                                      lock_path, ": ", std::strerror(errno),
                                                      " (is the directory writable?)"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char owner[32] = {};
    const ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "--state_dir ", dir, " is in use by another coordinator (pid ",
        n > 0 ? std::string(absl::StripAsciiWhitespace(owner)) : std::string("unknown"),
        "): stop it, or give this one another --state_dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // Only the error message uses the pid: the lock itself is held.
  }
  return fd;
}

// Brings the schema to kSchemaVersion. Errors: FAILED_PRECONDITION for a newer schema.
absl::Status Migrate(sqlite3* db, const std::string& path) {
  absl::StatusOr<std::string> has_table = QueryText(
      db, "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'");
  if (!has_table.ok()) return has_table.status();
  int version = 0;
  if (!has_table->empty()) {
    absl::StatusOr<std::string> text = QueryText(db, "SELECT version FROM schema_version");
    if (!text.ok()) return text.status();
    if (!absl::SimpleAtoi(*text, &version)) {
      return absl::DataLossError(absl::StrCat(path, ": unreadable schema_version '", *text,
                                              "': move the file aside or restore a backup"));
    }
  } else {
    absl::StatusOr<std::string> any = QueryText(db, "SELECT name FROM sqlite_master LIMIT 1");
    if (!any.ok()) return any.status();
    if (!any->empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is an SQLite database but not a ringleader coordinator's (no "
                       "schema_version table): give the coordinator another --state_dir"));
    }
  }
  if (version > SqliteJobStore::kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " was written by a newer ringleader (schema ", version, ", this "
                     "coordinator knows up to ", SqliteJobStore::kSchemaVersion,
                     "): run the newer coordinator, or restore a backup"));
  }
  for (int next = version + 1; next <= SqliteJobStore::kSchemaVersion; ++next) {
    const std::string step = absl::StrCat("BEGIN IMMEDIATE;", kMigrations[next - 1],
                                          next > 1 ? absl::StrCat("UPDATE schema_version SET "
                                                                  "version=", next, ";")
                                                   : std::string(),
                                          "COMMIT;");
    if (absl::Status s = Exec(db, step, absl::StrCat("migrating ", path, " to schema ", next));
        !s.ok()) {
      Exec(db, "ROLLBACK;", "rollback").IgnoreError();
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const std::string& state_dir) {
  if (state_dir.empty()) {
    return absl::InvalidArgumentError("--state_dir is empty: give a directory for the job store");
  }
  std::error_code error;
  fs::create_directories(state_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("--state_dir ", state_dir,
                                                      ": cannot create it: ", error.message()));
  }
  if (access(state_dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state_dir ", state_dir, " is not writable by this user: ",
                     std::strerror(errno)));
  }
  absl::StatusOr<int> lock = LockStateDir(state_dir);
  if (!lock.ok()) return lock.status();
  const std::string path = (fs::path(state_dir) / "coordinator.db").string();
  sqlite3* db = nullptr;
  const int opened = sqlite3_open_v2(path.c_str(), &db,
                                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                         SQLITE_OPEN_FULLMUTEX,
                                     nullptr);
  auto fail = [&](absl::Status s) {
    sqlite3_close(db);
    close(*lock);
    return s;
  };
  if (opened != SQLITE_OK) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", SqliteError(db))));
  }
  sqlite3_busy_timeout(db, 5000);
  // The first read tells a non-database file (SQLITE_NOTADB) from a database.
  absl::StatusOr<std::string> check = QueryText(db, "PRAGMA quick_check");
  if (!check.ok() || *check != "ok") {
    return fail(absl::DataLossError(absl::StrCat(
        path, " is corrupt or not a database (",
        check.ok() ? *check : std::string(check.status().message()),
        "): it was left untouched; move it aside to start with no jobs, or restore a backup")));
  }
  absl::StatusOr<std::string> mode = QueryText(db, "PRAGMA journal_mode=WAL");
  if (!mode.ok() || *mode != "wal") {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        path, ": cannot switch to WAL mode: ", mode.ok() ? *mode : mode.status().ToString())));
  }
  if (absl::Status s = Exec(db, "PRAGMA synchronous=FULL;", "PRAGMA synchronous"); !s.ok()) {
    return fail(s);
  }
  if (absl::Status migrated = Migrate(db, path); !migrated.ok()) return fail(migrated);
  return std::unique_ptr<SqliteJobStore>(new SqliteJobStore(path, db, *lock));
}

SqliteJobStore::SqliteJobStore(std::string path, sqlite3* db, int lock_fd)
    : path_(std::move(path)), db_(db), lock_fd_(lock_fd) {}

SqliteJobStore::~SqliteJobStore() {
  {
    absl::MutexLock lock(&mu_);
    sqlite3_close(db_);
  }
  close(lock_fd_);  // releases the flock
}

absl::Status SqliteJobStore::Save(const v1::JobStatus& job) {
  std::string bytes;
  if (!job.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialize job ", job.job_id()));
  }
  absl::MutexLock lock(&mu_);
  // One statement (atomic): a job archived meanwhile is not put back among the saved ones.
  static constexpr char kUpsert[] =
      "INSERT INTO jobs(id, sequence, version, status) "
      "SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (SELECT 1 FROM archived_jobs WHERE id = ?1) "
      "ON CONFLICT(id) DO UPDATE SET version=excluded.version, status=excluded.status "
      "WHERE excluded.version >= jobs.version";
  Statement stmt(db_, kUpsert);
  if (!stmt.ok()) return absl::UnavailableError(absl::StrCat(path_, ": ", SqliteError(db_)));
  BindRecord(stmt.get(), job, bytes);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) {
    return absl::UnavailableError(
        absl::StrCat(path_, ": saving job ", job.job_id(), ": ", SqliteError(db_)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::JobStatus>> SqliteJobStore::ReadStatuses(sqlite3_stmt* stmt) const {
  std::vector<v1::JobStatus> jobs;
  int step;
  while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
    const unsigned char* id_text = sqlite3_column_text(stmt, 0);
    const std::string id = id_text ? reinterpret_cast<const char*>(id_text) : "";
    const void* blob = sqlite3_column_blob(stmt, 1);
    const int size = sqlite3_column_bytes(stmt, 1);
    v1::JobStatus job;
    if (!job.ParseFromArray(blob, size)) {
      sqlite3_finalize(stmt);
      return absl::DataLossError(absl::StrCat(path_, ": the record of job ", id,
                                              " does not parse: restore a backup"));
    }
    jobs.push_back(std::move(job));
  }
  sqlite3_finalize(stmt);
  if (step != SQLITE_DONE) {
    return absl::UnavailableError(absl::StrCat(path_, ": ", SqliteError(db_)));
  }
  return jobs;
}

absl::StatusOr<std::vector<v1::JobStatus>> SqliteJobStore::LoadAll() const {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, "SELECT id, status FROM jobs ORDER BY sequence");
  if (!stmt.ok()) return absl::UnavailableError(absl::StrCat(path_, ": ", SqliteError(db_)));
  return ReadStatuses(stmt.release());
}

absl::Status SqliteJobStore::Archive(const v1::JobStatus& final_status) {
  if (!JobNumber(final_status.job_id()).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot archive job '", final_status.job_id(), "': not of the form job-N"));
  }
  std::string bytes;
  if (!final_status.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialize job ", final_status.job_id()));
  }
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat(path_, ": archiving job ", final_status.job_id());
  if (absl::Status begun = Exec(db_, "BEGIN IMMEDIATE;", what); !begun.ok()) return begun;
  auto fail = [&](const std::string& message) {
    Exec(db_, "ROLLBACK;", "rollback").IgnoreError();
    return absl::UnavailableError(absl::StrCat(what, ": ", message));
  };
  {
    static constexpr char kInsert[] =
        "INSERT INTO archived_jobs(id, sequence, version, status) VALUES(?1, ?2, ?3, ?4) "
        "ON CONFLICT(id) DO UPDATE SET version=excluded.version, status=excluded.status "
        "WHERE excluded.version >= archived_jobs.version";
    Statement insert(db_, kInsert);
    if (!insert.ok()) return fail(SqliteError(db_));
    BindRecord(insert.get(), final_status, bytes);
    if (sqlite3_step(insert.get()) != SQLITE_DONE) return fail(SqliteError(db_));
  }
  {
    Statement remove(db_, "DELETE FROM jobs WHERE id = ?1");
    if (!remove.ok()) return fail(SqliteError(db_));
    sqlite3_bind_text(remove.get(), 1, final_status.job_id().c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(remove.get()) != SQLITE_DONE) return fail(SqliteError(db_));
  }
  if (absl::Status committed = Exec(db_, "COMMIT;", what); !committed.ok()) {
    Exec(db_, "ROLLBACK;", "rollback").IgnoreError();
    return committed;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JobStatus> SqliteJobStore::LoadArchived(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, "SELECT id, status FROM archived_jobs WHERE id = ?1");
  if (!stmt.ok()) return absl::UnavailableError(absl::StrCat(path_, ": ", SqliteError(db_)));
  sqlite3_bind_text(stmt.get(), 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  absl::StatusOr<std::vector<v1::JobStatus>> found = ReadStatuses(stmt.release());
  if (!found.ok()) return found.status();
  if (found->empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not archived"));
  return std::move(found->front());
}

absl::StatusOr<std::vector<v1::JobStatus>> SqliteJobStore::ListArchived(uint64_t after_number,
                                                                        size_t limit) const {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_,
                 "SELECT id, status FROM archived_jobs WHERE sequence > ?1 ORDER BY sequence "
                 "LIMIT ?2");
  if (!stmt.ok()) return absl::UnavailableError(absl::StrCat(path_, ": ", SqliteError(db_)));
  sqlite3_bind_int64(stmt.get(), 1, static_cast<sqlite3_int64>(after_number));
  sqlite3_bind_int64(stmt.get(), 2,
                     static_cast<sqlite3_int64>(std::min<size_t>(limit, INT64_MAX)));
  return ReadStatuses(stmt.release());
}

absl::StatusOr<uint64_t> SqliteJobStore::HighestArchivedNumber() const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> text =
      QueryText(db_, "SELECT COALESCE(MAX(sequence), 0) FROM archived_jobs");
  if (!text.ok()) {
    return absl::UnavailableError(absl::StrCat(path_, ": ", text.status().message()));
  }
  uint64_t highest = 0;
  if (!absl::SimpleAtoi(*text, &highest)) {
    return absl::UnavailableError(
        absl::StrCat(path_, ": unreadable highest archived job number '", *text, "'"));
  }
  return highest;
}

}  // namespace ringleader
