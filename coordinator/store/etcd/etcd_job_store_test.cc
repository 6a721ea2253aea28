// EtcdJobStore against a real etcd (Debian's etcd-server) on loopback ports, started by this
// test: the JobStore contract (job_store_conformance.h), then what only etcd has: unreachable
// endpoints, the next endpoint tried, records above the size limit, pages, the key layout.
// Each test has a key prefix of its own in one etcd for the whole binary. A missing etcd fails
// every test, naming the package.
#include "coordinator/store/etcd/etcd_job_store.h"

#include <memory>
#include <string>

#include "coordinator/store/etcd/etcd_kv_grpc.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "coordinator/store/job_store_conformance.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

// The binary's etcd, started by the first test that needs it (never destroyed by itself: the
// environment below stops it).
absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>>& SharedProcess() {
  static auto* process = new absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>>(
      etcd::EtcdTestProcess::Start("ringleader-test"));
  return *process;
}

// The shared etcd; nullptr (and the reason in *error) when it could not be started.
etcd::EtcdTestProcess* SharedEtcd(absl::Status* error) {
  auto& process = SharedProcess();
  if (!process.ok()) {
    *error = process.status();
    return nullptr;
  }
  return process->get();
}

// Kills the shared etcd when every test is done.
class StopEtcd : public ::testing::Environment {
 public:
  void TearDown() override {
    if (SharedProcess().ok()) SharedProcess()->reset();
  }
};
::testing::Environment* const stop_etcd = ::testing::AddGlobalTestEnvironment(new StopEtcd);

absl::StatusOr<std::unique_ptr<etcd::EtcdKv>> Kv(std::vector<std::string> endpoints,
                                                 absl::Duration timeout = absl::Seconds(5)) {
  etcd::EtcdKvGrpcOptions options;
  options.endpoints = std::move(endpoints);
  options.call_timeout = timeout;
  absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(options);
  if (!kv.ok()) return kv.status();
  return std::unique_ptr<etcd::EtcdKv>(std::move(*kv));
}

class EtcdBackend : public JobStoreBackend {
 public:
  EtcdBackend(std::string endpoint, std::string prefix)
      : endpoint_(std::move(endpoint)), prefix_(std::move(prefix)) {}
  absl::StatusOr<std::shared_ptr<JobStore>> Open() override {
    absl::StatusOr<std::unique_ptr<etcd::EtcdKv>> kv = Kv({endpoint_});
    if (!kv.ok()) return kv.status();
    EtcdJobStoreOptions options;
    options.prefix = prefix_;
    options.page_size = 2;  // LoadAll reads several pages
    absl::StatusOr<std::unique_ptr<EtcdJobStore>> store =
        EtcdJobStore::Create(std::move(*kv), options);
    if (!store.ok()) return store.status();
    return std::shared_ptr<JobStore>(std::move(*store));
  }

 private:
  const std::string endpoint_;
  const std::string prefix_;
};

INSTANTIATE_TEST_SUITE_P(
    Stores, JobStoreConformance,
    ::testing::Values(JobStoreBackendFactory{
        "Etcd",
        [](const std::string& test) -> std::unique_ptr<JobStoreBackend> {
          absl::Status error;
          etcd::EtcdTestProcess* etcd = SharedEtcd(&error);
          if (etcd == nullptr) {
            ADD_FAILURE() << error;
            return nullptr;
          }
          return std::make_unique<EtcdBackend>(etcd->endpoint(),
                                                absl::StrCat("/conformance/", test, "/"));
        }}),
    JobStoreConformanceName);

class EtcdJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status error;
    etcd_ = SharedEtcd(&error);
    ASSERT_NE(etcd_, nullptr) << error;
    prefix_ = absl::StrCat("/", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                           "/");
  }
  std::unique_ptr<EtcdJobStore> Store(std::vector<std::string> endpoints,
                                      EtcdJobStoreOptions options = {},
                                      absl::Duration timeout = absl::Seconds(5)) {
    absl::StatusOr<std::unique_ptr<etcd::EtcdKv>> kv = Kv(std::move(endpoints), timeout);
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok()) return nullptr;
    options.prefix = prefix_;
    absl::StatusOr<std::unique_ptr<EtcdJobStore>> store =
        EtcdJobStore::Create(std::move(*kv), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  static std::string DeadEndpoint() {
    return absl::StrCat("http://127.0.0.1:", *etcd::FreeLoopbackPort());
  }

  etcd::EtcdTestProcess* etcd_ = nullptr;
  std::string prefix_;
};

v1::JobStatus Job(const std::string& id, uint64_t version) {
  v1::JobStatus job;
  job.set_job_id(id);
  job.set_version(version);
  job.set_state(v1::JOB_STATE_RUNNING);
  return job;
}

TEST_F(EtcdJobStoreTest, UnreachableEndpointsAreUnavailableNamingThem) {
  const std::string a = DeadEndpoint(), b = DeadEndpoint();
  std::unique_ptr<EtcdJobStore> store = Store({a, b}, {}, absl::Seconds(1));
  ASSERT_NE(store, nullptr);
  absl::Status saved = store->Save(Job("job-000001", 1));
  EXPECT_EQ(saved.code(), absl::StatusCode::kUnavailable) << saved;
  EXPECT_THAT(std::string(saved.message()), HasSubstr(a));
  EXPECT_THAT(std::string(saved.message()), HasSubstr(b));
  EXPECT_EQ(store->LoadAll().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->HighestArchivedNumber().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EtcdJobStoreTest, TheNextEndpointIsTriedWhenOneIsDown) {
  std::unique_ptr<EtcdJobStore> store = Store({DeadEndpoint(), etcd_->endpoint()});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Save(Job("job-000001", 1)).ok());
  auto jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 1u);
}

TEST_F(EtcdJobStoreTest, MalformedEndpointsAreRefused) {
  for (const char* endpoint : {"", "127.0.0.1", "http://127.0.0.1:99999", "https://h:2379"}) {
    etcd::EtcdKvGrpcOptions options;
    options.endpoints = {endpoint};
    auto kv = etcd::EtcdKvGrpc::Create(options);
    EXPECT_EQ(kv.status().code(), absl::StatusCode::kInvalidArgument) << endpoint;
  }
  EXPECT_EQ(etcd::EtcdKvGrpc::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdJobStoreTest, ARecordAboveTheLimitIsRefusedNamingTheJob) {
  EtcdJobStoreOptions options;
  options.max_value_bytes = 1000;
  std::unique_ptr<EtcdJobStore> store = Store({etcd_->endpoint()}, options);
  ASSERT_NE(store, nullptr);
  v1::JobStatus big = Job("job-000003", 1);
  big.mutable_spec()->set_name(std::string(2000, 'x'));
  absl::Status saved = store->Save(big);
  EXPECT_EQ(saved.code(), absl::StatusCode::kResourceExhausted) << saved;
  EXPECT_THAT(std::string(saved.message()), HasSubstr("job-000003"));
  EXPECT_EQ(store->Archive(big).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store->LoadAll()->empty());
  // etcd's own limit (1.5 MiB by default), had the store not kept under it: named by key.
  auto kv = Kv({etcd_->endpoint()});
  ASSERT_TRUE(kv.ok());
  absl::StatusOr<int64_t> put = (*kv)->Put(prefix_ + "huge", std::string(3 << 20, 'x'));
  EXPECT_FALSE(put.ok());
  EXPECT_THAT(put.status().code(), ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                                    absl::StatusCode::kResourceExhausted))
      << put.status();
  EXPECT_THAT(std::string(put.status().message()), HasSubstr(prefix_ + "huge")) << put.status();
}

TEST_F(EtcdJobStoreTest, KeysAreUnderThePrefixAndInNumberOrder) {
  std::unique_ptr<EtcdJobStore> store = Store({etcd_->endpoint()});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Save(Job("job-000010", 1)).ok());
  ASSERT_TRUE(store->Save(Job("job-9", 1)).ok());
  ASSERT_TRUE(store->Save(Job("odd-id", 1)).ok());
  ASSERT_TRUE(store->Archive(Job("job-000004", 2)).ok());
  auto kv = Kv({etcd_->endpoint()});
  ASSERT_TRUE(kv.ok());
  auto all = etcd::RangeAll(**kv, prefix_, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> keys;
  for (const etcd::KeyValue& entry : *all) keys.push_back(entry.key);
  EXPECT_THAT(keys, ::testing::ElementsAre(prefix_ + "archive/00000000000000000004",
                                           prefix_ + "jobs/00000000000000000000/odd-id",
                                           prefix_ + "jobs/00000000000000000009/job-9",
                                           prefix_ + "jobs/00000000000000000010/job-000010"));
  auto jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[2].job_id(), "job-000010");
}

TEST_F(EtcdJobStoreTest, AnUnreadableRecordIsDataLossNamingTheKey) {
  std::unique_ptr<EtcdJobStore> store = Store({etcd_->endpoint()});
  ASSERT_NE(store, nullptr);
  auto kv = Kv({etcd_->endpoint()});
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE((*kv)->Put(store->ArchivedKey(5), "\xff\xff not a record").ok());
  auto archived = store->LoadArchived("job-000005");
  EXPECT_EQ(archived.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(archived.status().message()), HasSubstr(store->ArchivedKey(5)));
  EXPECT_EQ(store->ListArchived(0, 10).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ringleader
