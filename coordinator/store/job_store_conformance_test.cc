// The JobStore contract (job_store_conformance.h) on InMemoryJobStore and SqliteJobStore.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/store/job_store_conformance.h"
#include "coordinator/store/sqlite_job_store.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

// Every Open is the same store: what it holds outlives the coordinator that used it.
class InMemoryBackend : public JobStoreBackend {
 public:
  absl::StatusOr<std::shared_ptr<JobStore>> Open() override { return store_; }

 private:
  std::shared_ptr<InMemoryJobStore> store_ = std::make_shared<InMemoryJobStore>();
};

class SqliteBackend : public JobStoreBackend {
 public:
  explicit SqliteBackend(std::string dir) : dir_(std::move(dir)) { fs::remove_all(dir_); }
  absl::StatusOr<std::shared_ptr<JobStore>> Open() override {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(dir_);
    if (!store.ok()) return store.status();
    return std::shared_ptr<JobStore>(std::move(*store));
  }

 private:
  const std::string dir_;
};

INSTANTIATE_TEST_SUITE_P(
    Stores, JobStoreConformance,
    ::testing::Values(
        JobStoreBackendFactory{"InMemory",
                               [](const std::string&) -> std::unique_ptr<JobStoreBackend> {
                                 return std::make_unique<InMemoryBackend>();
                               }},
        JobStoreBackendFactory{"Sqlite",
                               [](const std::string& test) -> std::unique_ptr<JobStoreBackend> {
                                 return std::make_unique<SqliteBackend>(
                                     (fs::path(std::getenv("TEST_TMPDIR")) / test).string());
                               }}),
    JobStoreConformanceName);

}  // namespace
}  // namespace ringleader
