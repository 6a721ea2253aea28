// A JobStore in etcd (the v3 key-value API, through EtcdKv), with SqliteJobStore's semantics:
// every Save and Archive is committed in etcd before it returns, a Save never replaces a higher
// JobStatus.version nor brings an archived job back, Archive moves a job in one transaction.
//
// Keys, under a prefix (default "/ringleader/"); N = the job number, zero-padded to 20 digits so
// that etcd's key order is job-number order:
//   <prefix>jobs/N/<id>     a saved job (ids without a number: N = 0), the serialized
//                           ringleader.v1.JobStatus
//   <prefix>archive/N       an archived job's final JobStatus
//   <prefix>attempt_secret  the attempt secret's raw bytes, as <state_dir>/attempt_secret holds
//                           them (written by ImportStateDir, etcd_import.h; not by this store)
// The next id a restarted coordinator hands out comes from these keys, as with SQLite: above
// the highest number saved or archived.
//
// Save and Archive read what is stored, then write with a Txn whose compare is the mod_revision
// they read (and the absence of the archive key, for Save): a concurrent write makes the Txn
// fail and the call reads again, so writes from several threads or retries land in any order.
//
// Records larger than max_value_bytes (default 1 MiB, below etcd's default 1.5 MiB request
// limit) are refused with RESOURCE_EXHAUSTED naming the job, before anything is sent.
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_JOB_STORE_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_JOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/etcd/etcd_kv.h"
#include "coordinator/store/job_store.h"

namespace ringleader {

struct EtcdJobStoreOptions {
  // Every key starts with it; ends with '/'.
  std::string prefix = "/ringleader/";
  // The largest serialized JobStatus written.
  size_t max_value_bytes = 1 << 20;
  // Records per Range page (LoadAll).
  int64_t page_size = 64;
};

class EtcdJobStore : public JobStore {
 public:
  // Errors: INVALID_ARGUMENT (a prefix not ending in '/', page_size < 1). Does not contact etcd.
  static absl::StatusOr<std::unique_ptr<EtcdJobStore>> Create(std::unique_ptr<etcd::EtcdKv> kv,
                                                              EtcdJobStoreOptions options = {});

  // Errors: UNAVAILABLE (etcd did not answer), RESOURCE_EXHAUSTED (the record is larger than
  // max_value_bytes, or etcd refused its size or is out of space).
  absl::Status Save(const v1::JobStatus& job) override;
  // Errors: UNAVAILABLE; DATA_LOSS naming the key whose record does not parse.
  absl::StatusOr<std::vector<v1::JobStatus>> LoadAll() const override;
  // Errors: INVALID_ARGUMENT (an id not of the form job-N), UNAVAILABLE, RESOURCE_EXHAUSTED.
  absl::Status Archive(const v1::JobStatus& final_status) override;
  // Errors: NOT_FOUND; UNAVAILABLE; DATA_LOSS.
  absl::StatusOr<v1::JobStatus> LoadArchived(const std::string& job_id) const override;
  // Errors: UNAVAILABLE; DATA_LOSS.
  absl::StatusOr<std::vector<v1::JobStatus>> ListArchived(uint64_t after_number,
                                                          size_t limit) const override;
  // Errors: UNAVAILABLE; DATA_LOSS (a key under archive/ that is not a number).
  absl::StatusOr<uint64_t> HighestArchivedNumber() const override;

  const EtcdJobStoreOptions& options() const { return options_; }
  // The keys of job `job_id` (tests).
  std::string SavedKey(const std::string& job_id) const;
  std::string ArchivedKey(uint64_t number) const;

 private:
  EtcdJobStore(std::unique_ptr<etcd::EtcdKv> kv, EtcdJobStoreOptions options);
  absl::StatusOr<std::string> Serialize(const v1::JobStatus& job, const std::string& key) const;
  absl::StatusOr<v1::JobStatus> Parse(const etcd::KeyValue& kv) const;

  const std::unique_ptr<etcd::EtcdKv> kv_;  // thread-safe
  const EtcdJobStoreOptions options_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_JOB_STORE_H_
