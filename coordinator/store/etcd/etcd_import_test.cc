// ImportStateDir against a real etcd (Debian's etcd-server) this test starts, from SQLite state
// directories it fills under TEST_TMPDIR. Each test has a key prefix of its own. A missing etcd
// fails every test, naming the package.
#include "coordinator/store/etcd/etcd_import.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/store/etcd/etcd_job_store.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "coordinator/store/sqlite_job_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The binary's etcd, started by the first test (the environment below stops it).
absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>>& SharedProcess() {
  static auto* process = new absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>>(
      etcd::EtcdTestProcess::Start("ringleader-import-test"));
  return *process;
}

class StopEtcd : public ::testing::Environment {
 public:
  void TearDown() override {
    if (SharedProcess().ok()) SharedProcess()->reset();
  }
};
::testing::Environment* const stop_etcd = ::testing::AddGlobalTestEnvironment(new StopEtcd);

v1::JobStatus Job(const std::string& id, uint64_t version, v1::JobState state) {
  v1::JobStatus job;
  job.set_job_id(id);
  job.set_version(version);
  job.set_state(state);
  job.mutable_spec()->set_name(absl::StrCat("train-", id));
  job.mutable_spec()->set_world_size(4);
  v1::StateTransition* t = job.add_transitions();
  t->set_state(state);
  t->set_time_unix_ms(1700000000000 + static_cast<int64_t>(version));
  t->set_reason("test");
  return job;
}

class EtcdImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& process = SharedProcess();
    ASSERT_TRUE(process.ok()) << process.status();
    etcd::EtcdKvGrpcOptions kv_options;
    kv_options.endpoints = {(*process)->endpoint()};
    absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(kv_options);
    ASSERT_TRUE(kv.ok()) << kv.status();
    kv_ = std::move(*kv);
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options_.prefix = absl::StrCat("/import/", test, "/");
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = (fs::path(tmp ? tmp : "/tmp") / absl::StrCat("state-", test)).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // A store reading what the import wrote.
  std::unique_ptr<EtcdJobStore> EtcdStore() {
    etcd::EtcdKvGrpcOptions kv_options;
    kv_options.endpoints = {(*SharedProcess())->endpoint()};
    absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(kv_options);
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<EtcdJobStore>> store =
        EtcdJobStore::Create(std::move(*kv), options_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // How many keys there are under the test's prefix.
  size_t KeysUnderPrefix() {
    absl::StatusOr<std::vector<etcd::KeyValue>> all = etcd::RangeAll(*kv_, options_.prefix, 100);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? all->size() : 0;
  }

  void WriteSecret(const std::string& bytes) {
    std::ofstream out(fs::path(dir_) / "attempt_secret", std::ios::binary);
    out << bytes;
  }

  std::unique_ptr<etcd::EtcdKvGrpc> kv_;
  EtcdJobStoreOptions options_;
  std::string dir_;
};

TEST_F(EtcdImportTest, CopiesSavedArchivedJobsAndTheSecretThenRefusesASecondImport) {
  // Two pages of archived jobs (the import reads them 256 at a time), saved jobs above them
  // and one without a number; a secret with every byte value.
  std::vector<v1::JobStatus> saved, archived;
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    for (int n = 1; n <= 260; ++n) {
      v1::JobStatus job = Job(absl::StrFormat("job-%06d", n), 7, v1::JOB_STATE_SUCCEEDED);
      ASSERT_TRUE((*sqlite)->Save(Job(job.job_id(), 3, v1::JOB_STATE_RUNNING)).ok());
      ASSERT_TRUE((*sqlite)->Archive(job).ok());
      archived.push_back(job);
    }
    for (int n = 261; n <= 263; ++n) {
      saved.push_back(Job(absl::StrFormat("job-%06d", n), 5, v1::JOB_STATE_RUNNING));
    }
    saved.push_back(Job("adhoc", 2, v1::JOB_STATE_QUEUED));
    for (const v1::JobStatus& job : saved) ASSERT_TRUE((*sqlite)->Save(job).ok());
  }
  std::string secret;
  for (int b = 0; b < 256; ++b) secret.push_back(static_cast<char>(b));
  WriteSecret(secret);

  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, *kv_, options_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->saved_jobs, saved.size());
  EXPECT_EQ(summary->archived_jobs, archived.size());
  EXPECT_TRUE(summary->secret_copied);

  std::unique_ptr<EtcdJobStore> store = EtcdStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<v1::JobStatus>> loaded = store->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // etcd's order is by number ("adhoc" has none: first).
  ASSERT_EQ(loaded->size(), saved.size());
  EXPECT_EQ((*loaded)[0].SerializeAsString(), saved[3].SerializeAsString());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*loaded)[i + 1].SerializeAsString(), saved[i].SerializeAsString()) << i;
  }
  absl::StatusOr<std::vector<v1::JobStatus>> listed = store->ListArchived(0, 1000);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), archived.size());
  for (size_t i = 0; i < archived.size(); ++i) {
    EXPECT_EQ((*listed)[i].SerializeAsString(), archived[i].SerializeAsString()) << i;
  }
  absl::StatusOr<uint64_t> highest = store->HighestArchivedNumber();
  ASSERT_TRUE(highest.ok()) << highest.status();
  EXPECT_EQ(*highest, 260u);
  etcd::RangeRequest get;
  get.key = AttemptSecretKey(options_);
  EXPECT_EQ(get.key, options_.prefix + "attempt_secret");
  absl::StatusOr<etcd::RangeResult> found = kv_->Range(get);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->kvs.size(), 1u);
  EXPECT_EQ(found->kvs[0].value, secret);
  const size_t keys = KeysUnderPrefix();
  EXPECT_EQ(keys, saved.size() + archived.size() + 1);

  // Again: refused, naming the prefix and the endpoint and saying what to do; nothing changed.
  absl::StatusOr<ImportSummary> again = ImportStateDir(dir_, *kv_, options_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  const std::string message(again.status().message());
  EXPECT_THAT(message, HasSubstr(options_.prefix));
  EXPECT_THAT(message, HasSubstr((*SharedProcess())->endpoint()));
  EXPECT_THAT(message, HasSubstr("etcdctl del --prefix"));
  EXPECT_EQ(KeysUnderPrefix(), keys);

  // The SQLite directory is as it was.
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  absl::StatusOr<std::vector<v1::JobStatus>> left = (*sqlite)->LoadAll();
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(left->size(), saved.size());
}

TEST_F(EtcdImportTest, WithoutASecretFileNoSecretKeyIsWritten) {
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    ASSERT_TRUE((*sqlite)->Save(Job("job-000001", 1, v1::JOB_STATE_QUEUED)).ok());
  }
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, *kv_, options_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->saved_jobs, 1u);
  EXPECT_EQ(summary->archived_jobs, 0u);
  EXPECT_FALSE(summary->secret_copied);
  EXPECT_EQ(KeysUnderPrefix(), 1u);
}

TEST_F(EtcdImportTest, ADirectoryInUseIsRefusedClearlyAndNothingIsWritten) {
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> running = SqliteJobStore::Open(dir_);
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE((*running)->Save(Job("job-000001", 1, v1::JOB_STATE_RUNNING)).ok());
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, *kv_, options_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition) << summary.status();
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr(dir_));
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr(absl::StrCat(getpid())));
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("stop the coordinator"));
  EXPECT_EQ(KeysUnderPrefix(), 0u);
}

TEST_F(EtcdImportTest, ADirectoryWithoutADatabaseIsNotFoundAndStaysEmpty) {
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, *kv_, options_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound) << summary.status();
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("coordinator.db"));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "coordinator.db"));
  EXPECT_EQ(KeysUnderPrefix(), 0u);
}

TEST_F(EtcdImportTest, AShortSecretIsRefusedBeforeAnythingIsWritten) {
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    ASSERT_TRUE((*sqlite)->Save(Job("job-000001", 1, v1::JOB_STATE_QUEUED)).ok());
  }
  WriteSecret("short");
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, *kv_, options_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition) << summary.status();
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("attempt_secret"));
  EXPECT_EQ(KeysUnderPrefix(), 0u);
}

TEST_F(EtcdImportTest, AnUnreachableEtcdIsUnavailable) {
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> sqlite = SqliteJobStore::Open(dir_);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  }
  etcd::EtcdKvGrpcOptions dead;
  dead.endpoints = {absl::StrCat("http://127.0.0.1:", *etcd::FreeLoopbackPort())};
  dead.call_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(dead);
  ASSERT_TRUE(kv.ok()) << kv.status();
  absl::StatusOr<ImportSummary> summary = ImportStateDir(dir_, **kv, options_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kUnavailable) << summary.status();
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr(dead.endpoints[0]));
}

}  // namespace
}  // namespace ringleader
