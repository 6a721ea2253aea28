// The coordinator's durable JobStore: embedded SQLite (Debian's libsqlite3) in WAL mode with
// synchronous=FULL, one database per state directory (<state_dir>/coordinator.db).
//
//   Open(state_dir)
//     ├─ the directory cannot be created or written      → FAILED_PRECONDITION naming it
//     ├─ another coordinator holds <state_dir>/coordinator.lock (flock)
//     │                                                   → FAILED_PRECONDITION naming its pid
//     ├─ the file is not a database / fails quick_check   → DATA_LOSS (never truncated: move it
//     │                                                      aside or restore a backup)
//     ├─ schema_version newer than this binary knows      → FAILED_PRECONDITION (upgrade)
//     └─ ok: older schemas are migrated step by step in one transaction each
//
// Schema (version 2; a version-1 file gains archived_jobs when opened):
//   schema_version(version INTEGER)           one row
//   jobs(id TEXT PRIMARY KEY, sequence INTEGER, version INTEGER, status BLOB)
//     status = the serialized ringleader.v1.JobStatus (spec, transitions, attempts/generation,
//     ranks, epochs, alarms, verdict); sequence = the number in "job-000042", so the next id a
//     restarted coordinator hands out is max(sequence) + 1 and ids never repeat.
//   archived_jobs(id TEXT PRIMARY KEY, sequence INTEGER, version INTEGER, status BLOB)   (v2)
//     finished jobs the coordinator archived (JobStore::Archive), each with its final status,
//     the same columns as jobs; indexed by sequence (ListArchived's pages, the highest number).
//
// Save is an upsert that never replaces a newer version of a job with an older one, nor puts an
// archived job back into jobs, so saves made outside the coordinator's lock may land in any
// order. Archive moves a job's row from jobs to archived_jobs in one transaction. Each write is
// one transaction, durable (fsync'd) before it returns. Thread-safe (one connection behind a
// mutex).
#ifndef RINGLEADER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_
#define RINGLEADER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/job_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ringleader {

class SqliteJobStore : public JobStore {
 public:
  // The schema this binary writes.
  static constexpr int kSchemaVersion = 2;

  // Opens (creating when absent) <state_dir>/coordinator.db. Errors: see the file comment.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(const std::string& state_dir);
  ~SqliteJobStore() override;

  // Errors: UNAVAILABLE (the write or its fsync failed: disk full, I/O error).
  absl::Status Save(const v1::JobStatus& job) override;
  // Errors: UNAVAILABLE; DATA_LOSS naming the job whose record does not parse.
  absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const override;
  // Errors: INVALID_ARGUMENT (an id not of the form job-N), UNAVAILABLE (the write or its fsync
  // failed; nothing changed).
  absl::Status Archive(const v1::JobStatus& final_status) override;
  // Errors: NOT_FOUND; UNAVAILABLE; DATA_LOSS naming the job whose record does not parse.
  absl::StatusOr<v1::JobStatus> LoadArchived(const std::string& job_id) const override;
  // Errors: UNAVAILABLE; DATA_LOSS naming the job whose record does not parse.
  absl::StatusOr<std::vector<v1::JobStatus>> ListArchived(uint64_t after_number,
                                                          size_t limit) const override;
  // Errors: UNAVAILABLE.
  absl::StatusOr<uint64_t> HighestArchivedNumber() const override;

  const std::string& path() const { return path_; }

 private:
  SqliteJobStore(std::string path, sqlite3* db, int lock_fd);
  // The statuses in column 1 of `stmt`'s rows (column 0: the id, for DATA_LOSS), finalizing it.
  absl::StatusOr<std::vector<v1::JobStatus>> ReadStatuses(sqlite3_stmt* stmt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);
  const int lock_fd_;  // holds the flock for the store's lifetime
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_STORE_SQLITE_JOB_STORE_H_
