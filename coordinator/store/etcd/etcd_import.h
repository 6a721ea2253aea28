// Moving a coordinator's SQLite state directory (--state_dir) into etcd (--store=etcd), once, so
// that a coordinator switched to etcd keeps its jobs, its archive, the job ids it hands out next
// and the attempt tokens of the ranks it takes back.
//
// ImportStateDir(state_dir, kv, options):
//   1. Opens <state_dir>/coordinator.db with SqliteJobStore::Open, which takes the directory's
//      lock (and migrates an older schema, as a coordinator starting on it would).
//        no coordinator.db in state_dir                → NOT_FOUND naming the file
//        a coordinator runs on the directory           → FAILED_PRECONDITION naming its pid:
//                                                        stop it first
//        any other Open error (DATA_LOSS, ...)         → that error, naming the directory
//   2. Reads <state_dir>/attempt_secret when present (raw bytes, as the coordinator keeps it;
//      AttemptTokens::LoadOrCreateSecret); one shorter than 16 bytes → FAILED_PRECONDITION.
//   3. Refuses when anything exists under options.prefix in etcd (a coordinator already uses
//      it, or an earlier import ran): FAILED_PRECONDITION naming the prefix and kv.Describe(),
//      saying how to proceed (another prefix, or delete the keys with
//      `etcdctl del --prefix <prefix>` once nothing uses them). Nothing is written then.
//   4. Copies, through EtcdJobStore (its key layout, etcd_job_store.h): every saved job
//      (LoadAll), then every archived job (ListArchived, page by page), then the secret to the
//      key AttemptSecretKey(options) (<prefix>attempt_secret), the raw bytes.
//
// Not atomic: etcd takes a bounded number of operations per transaction, so the records are
// written one by one. An error in step 4 (UNAVAILABLE, RESOURCE_EXHAUSTED for a record above
// options.max_value_bytes, DATA_LOSS for an unreadable SQLite record) leaves what was copied
// under the prefix, and the message says so: delete the prefix and run it again. Nothing else
// may write under the prefix while it runs (start the coordinator on etcd afterwards). The
// SQLite directory is only read (apart from a schema migration) and stays as it was: it is the
// way back.
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_IMPORT_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_IMPORT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/store/etcd/etcd_job_store.h"
#include "coordinator/store/etcd/etcd_kv.h"

namespace ringleader {

struct ImportSummary {
  size_t saved_jobs = 0;     // copied to <prefix>jobs/
  size_t archived_jobs = 0;  // copied to <prefix>archive/
  bool secret_copied = false;  // <state_dir>/attempt_secret existed and was copied
};

// The key of the attempt secret in etcd: <prefix>attempt_secret.
std::string AttemptSecretKey(const EtcdJobStoreOptions& options);

// See the file comment. `kv` is used, not kept.
absl::StatusOr<ImportSummary> ImportStateDir(const std::string& state_dir, etcd::EtcdKv& kv,
                                             const EtcdJobStoreOptions& options);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_IMPORT_H_
