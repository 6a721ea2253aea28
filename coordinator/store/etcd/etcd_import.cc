#include "coordinator/store/etcd/etcd_import.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_job_store.h"

namespace ringleader {
namespace {

// EtcdJobStore owns its EtcdKv; the import borrows the caller's.
class BorrowedKv : public etcd::EtcdKv {
 public:
  explicit BorrowedKv(etcd::EtcdKv& kv) : kv_(kv) {}
  absl::StatusOr<etcd::RangeResult> Range(const etcd::RangeRequest& request) override {
    return kv_.Range(request);
  }
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value) override {
    return kv_.Put(key, value);
  }
  absl::StatusOr<int64_t> DeleteRange(const std::string& key,
                                      const std::string& range_end) override {
    return kv_.DeleteRange(key, range_end);
  }
  absl::StatusOr<etcd::TxnResult> Txn(const etcd::TxnRequest& request) override {
    return kv_.Txn(request);
  }
  std::string Describe() const override { return kv_.Describe(); }

 private:
  etcd::EtcdKv& kv_;
};

constexpr size_t kArchivePage = 256;
constexpr size_t kMinSecretBytes = 16;  // as AttemptTokens::LoadOrCreateSecret

}  // namespace

std::string AttemptSecretKey(const EtcdJobStoreOptions& options) {
  return absl::StrCat(options.prefix, "attempt_secret");
}

absl::StatusOr<ImportSummary> ImportStateDir(const std::string& state_dir, etcd::EtcdKv& kv,
                                             const EtcdJobStoreOptions& options) {
  const std::string what = absl::StrCat("importing state directory ", state_dir, " into ",
                                        kv.Describe(), " under prefix ", options.prefix);
  // 1. The SQLite store, read side. Open would create an empty database in a wrong directory.
  const std::string db = absl::StrCat(state_dir, "/coordinator.db");
  if (access(db.c_str(), F_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(what, ": ", db,
                                            " does not exist: give the --state_dir the "
                                            "coordinator ran with"));
  }
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(state_dir);
  if (!sqlite.ok()) {
    const bool in_use = sqlite.status().code() == absl::StatusCode::kFailedPrecondition;
    return absl::Status(sqlite.status().code(),
                        absl::StrCat(what, ": ", sqlite.status().message(),
                                     in_use ? " (stop the coordinator using it, then import)"
                                            : ""));
  }

  // 2. The attempt secret, when there is one.
  const std::string secret_path = absl::StrCat(state_dir, "/attempt_secret");
  std::optional<std::string> secret;
  if (access(secret_path.c_str(), F_OK) == 0) {
    std::ifstream file(secret_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file.good() && !file.eof()) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": cannot read ", secret_path));
    }
    if (bytes.size() < kMinSecretBytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": ", secret_path, " holds ", bytes.size(), " bytes (at least ",
          kMinSecretBytes, "; the coordinator would refuse it): remove it to import without it"));
    }
    secret = std::move(bytes);
  }

  // 3. Nothing under the prefix yet.
  etcd::RangeRequest any;
  any.key = options.prefix;
  any.range_end = etcd::PrefixEnd(options.prefix);
  any.limit = 1;
  any.keys_only = true;
  absl::StatusOr<etcd::RangeResult> existing = kv.Range(any);
  if (!existing.ok()) {
    return absl::Status(existing.status().code(),
                        absl::StrCat(what, ": ", existing.status().message()));
  }
  if (!existing->kvs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": refused, the prefix is not empty (", kv.Describe(), " holds key ",
        existing->kvs[0].key, " under ", options.prefix,
        "): a coordinator uses it or it was imported already. Import under another prefix, "
        "or, once nothing uses it, delete it (etcdctl del --prefix ", options.prefix,
        ") and import again"));
  }

  // 4. Copy.
  absl::StatusOr<std::unique_ptr<EtcdJobStore>> etcd_store =
      EtcdJobStore::Create(std::make_unique<BorrowedKv>(kv), options);
  if (!etcd_store.ok()) return etcd_store.status();
  ImportSummary summary;
  auto partial = [&](const absl::Status& error, const std::string& step) {
    return absl::Status(
        error.code(),
        absl::StrCat(what, ": ", step, ": ", error.message(), " (copied before the error: ",
                     summary.saved_jobs, " saved, ", summary.archived_jobs,
                     " archived jobs; they stay under ", options.prefix,
                     ": delete it with etcdctl del --prefix ", options.prefix,
                     " before importing again)"));
  };
  absl::StatusOr<std::vector<v1::JobStatus>> saved = (*sqlite)->LoadAll();
  if (!saved.ok()) return partial(saved.status(), "reading the saved jobs");
  for (const v1::JobStatus& job : *saved) {
    if (absl::Status s = (*etcd_store)->Save(job); !s.ok()) {
      return partial(s, absl::StrCat("copying job ", job.job_id()));
    }
    ++summary.saved_jobs;
  }
  uint64_t after = 0;
  while (true) {
    absl::StatusOr<std::vector<v1::JobStatus>> page = (*sqlite)->ListArchived(after, kArchivePage);
    if (!page.ok()) return partial(page.status(), "reading the archived jobs");
    for (const v1::JobStatus& job : *page) {
      if (absl::Status s = (*etcd_store)->Archive(job); !s.ok()) {
        return partial(s, absl::StrCat("copying archived job ", job.job_id()));
      }
      ++summary.archived_jobs;
    }
    if (page->size() < kArchivePage) break;
    const uint64_t last = JobNumber(page->back().job_id()).value_or(0);
    if (last <= after) {  // would read the same page forever
      return partial(absl::DataLossError(absl::StrCat("archived job ", page->back().job_id(),
                                                      " is out of order")),
                     "reading the archived jobs");
    }
    after = last;
  }
  if (secret.has_value()) {
    absl::StatusOr<int64_t> put = kv.Put(AttemptSecretKey(options), *secret);
    if (!put.ok()) return partial(put.status(), "copying the attempt secret");
    summary.secret_copied = true;
  }
  return summary;
}

}  // namespace ringleader
