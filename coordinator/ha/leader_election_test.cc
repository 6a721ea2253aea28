// LeaderElection and FencedEtcdKv against a real etcd (started here): who leads, what a
// standby knows, and that a deposed leader's writes are refused by etcd itself. Time on the
// coordinators' side is a FakeClock; etcd's leases run in real time but no test waits for one
// to expire (they are revoked instead, which etcd treats the same way).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/ha/fenced_kv.h"
#include "coordinator/ha/leader_election.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"
#include "coordinator/store/etcd/etcd_test_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using Change = LeaderElection::Change;

etcd::EtcdTestProcess* shared_etcd = nullptr;

// Forwards to a real EtcdKv, or fails every call UNAVAILABLE while `down` (etcd unreachable
// from this coordinator only).
class Switchable : public etcd::EtcdKv {
 public:
  explicit Switchable(std::shared_ptr<etcd::EtcdKv> kv) : kv_(std::move(kv)) {}
  std::atomic<bool> down{false};

  absl::StatusOr<etcd::RangeResult> Range(const etcd::RangeRequest& r) override {
    if (down) return Down();
    return kv_->Range(r);
  }
  absl::StatusOr<int64_t> Put(const std::string& k, const std::string& v) override {
    if (down) return Down();
    return kv_->Put(k, v);
  }
  absl::StatusOr<int64_t> DeleteRange(const std::string& k, const std::string& e) override {
    if (down) return Down();
    return kv_->DeleteRange(k, e);
  }
  absl::StatusOr<etcd::TxnResult> Txn(const etcd::TxnRequest& r) override {
    if (down) return Down();
    return kv_->Txn(r);
  }
  std::string Describe() const override { return kv_->Describe(); }
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl) override {
    if (down) return Down();
    return kv_->LeaseGrant(ttl);
  }
  absl::StatusOr<absl::Duration> LeaseKeepAlive(int64_t id) override {
    if (down) return Down();
    return kv_->LeaseKeepAlive(id);
  }
  absl::Status LeaseRevoke(int64_t id) override {
    if (down) return Down();
    return kv_->LeaseRevoke(id);
  }

 private:
  static absl::Status Down() { return absl::UnavailableError("etcd at test: no endpoint answered"); }
  std::shared_ptr<etcd::EtcdKv> kv_;
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<etcd::EtcdTestProcess>> started =
        etcd::EtcdTestProcess::Start("election");
    ASSERT_TRUE(started.ok()) << started.status();
    shared_etcd = started->release();
  }
  static void TearDownTestSuite() {
    delete shared_etcd;
    shared_etcd = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(shared_etcd, nullptr);
    etcd::EtcdKvGrpcOptions options;
    options.endpoints = {shared_etcd->endpoint()};
    absl::StatusOr<std::unique_ptr<etcd::EtcdKvGrpc>> kv = etcd::EtcdKvGrpc::Create(options);
    ASSERT_TRUE(kv.ok()) << kv.status();
    kv_ = std::move(*kv);
    // A key of its own per test: the tests share one etcd.
    key_ = absl::StrCat("/test-", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "/leader");
  }

  std::unique_ptr<LeaderElection> Coordinator(const std::string& self,
                                              std::shared_ptr<etcd::EtcdKv> kv = nullptr) {
    LeaderElectionOptions options;
    options.key = key_;
    options.self = self;
    options.wake = [this] { ++wakes_; };
    return std::make_unique<LeaderElection>(kv != nullptr ? kv : kv_, &clock_, options);
  }

  // What is stored at `key` ("" when absent).
  std::string Read(const std::string& key) {
    etcd::RangeRequest read;
    read.key = key;
    absl::StatusOr<etcd::RangeResult> got = kv_->Range(read);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() && !got->kvs.empty() ? got->kvs[0].value : "";
  }

  std::shared_ptr<etcd::EtcdKv> kv_;
  std::string key_;
  FakeClock clock_;
  std::atomic<int> wakes_{0};
};

TEST_F(LeaderElectionTest, TheFirstToCampaignLeadsAndTheOtherKnowsWhere) {
  auto a = Coordinator("10.0.0.1:7070");
  auto b = Coordinator("10.0.0.2:7070");
  EXPECT_EQ(a->Step().change, Change::kElected);
  EXPECT_EQ(b->Step().change, Change::kNone);
  EXPECT_TRUE(a->leading());
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->leader(), "10.0.0.1:7070");
  EXPECT_EQ(a->leader(), "10.0.0.1:7070");
  EXPECT_EQ(Read(key_), "10.0.0.1:7070");
  ASSERT_NE(a->fence(), nullptr);
  EXPECT_EQ(b->fence(), nullptr);

  // Renewals keep the term.
  clock_.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(a->next_step_in(), absl::ZeroDuration());
  EXPECT_EQ(a->Step().change, Change::kNone);
  EXPECT_TRUE(a->last_error().ok()) << a->last_error();
  EXPECT_EQ(a->next_step_in(), absl::Milliseconds(1500));
  EXPECT_EQ(a->terms_won(), 1);
}

TEST_F(LeaderElectionTest, AResigningLeaderIsReplacedAtTheNextPoll) {
  auto a = Coordinator("a:1");
  auto b = Coordinator("b:1");
  ASSERT_EQ(a->Step().change, Change::kElected);
  ASSERT_EQ(b->Step().change, Change::kNone);
  ASSERT_TRUE(a->Resign().ok());
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(b->Step().change, Change::kElected);
  EXPECT_EQ(a->Step().change, Change::kNone);
  EXPECT_EQ(a->leader(), "b:1");
}

TEST_F(LeaderElectionTest, ADeposedLeadersWriteIsRefusedByEtcdAndItStepsDown) {
  auto a = Coordinator("a:1");
  auto b = Coordinator("b:1");
  ASSERT_EQ(a->Step().change, Change::kElected);
  FencedEtcdKv a_writes(kv_, a->fence());
  ASSERT_TRUE(a_writes.Put(key_ + "-data", "from a").ok());

  // a is paused past its lease: etcd ends the lease (revoked here; expiry does the same) and b
  // takes over. a still believes it leads.
  etcd::RangeRequest read;
  read.key = key_;
  absl::StatusOr<etcd::RangeResult> held = kv_->Range(read);
  ASSERT_TRUE(held.ok() && held->kvs.size() == 1);
  ASSERT_TRUE(kv_->LeaseRevoke(held->kvs[0].lease).ok());
  ASSERT_EQ(b->Step().change, Change::kElected);
  EXPECT_TRUE(a->leading());

  const absl::Status refused = a_writes.Put(key_ + "-data", "from a, deposed").status();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("no longer leads"));
  EXPECT_THAT(refused.message(), HasSubstr("b:1"));
  EXPECT_EQ(Read(key_ + "-data"), "from a");
  EXPECT_EQ(wakes_.load(), 1);
  // Every later write is refused without reaching etcd.
  EXPECT_TRUE(absl::IsUnavailable(a_writes.DeleteRange(key_ + "-data", "").status()));
  EXPECT_EQ(Read(key_ + "-data"), "from a");

  const LeaderElection::Outcome deposed = a->Step();
  EXPECT_EQ(deposed.change, Change::kDeposed);
  EXPECT_THAT(deposed.reason, HasSubstr("b:1"));
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(a->Step().change, Change::kNone);
  EXPECT_EQ(a->leader(), "b:1");

  // The new leader's fenced writes go through.
  FencedEtcdKv b_writes(kv_, b->fence());
  ASSERT_TRUE(b_writes.Put(key_ + "-data", "from b").ok());
  EXPECT_EQ(Read(key_ + "-data"), "from b");
}

TEST_F(LeaderElectionTest, ALeaseFoundExpiredAtRenewalDeposes) {
  auto a = Coordinator("a:1");
  ASSERT_EQ(a->Step().change, Change::kElected);
  etcd::RangeRequest read;
  read.key = key_;
  absl::StatusOr<etcd::RangeResult> held = kv_->Range(read);
  ASSERT_TRUE(held.ok() && held->kvs.size() == 1);
  ASSERT_TRUE(kv_->LeaseRevoke(held->kvs[0].lease).ok());
  clock_.Advance(absl::Milliseconds(1500));
  const LeaderElection::Outcome deposed = a->Step();
  EXPECT_EQ(deposed.change, Change::kDeposed);
  EXPECT_THAT(deposed.reason, HasSubstr("lease expired"));
  // The key is gone with the lease: a campaigns again and wins a new term.
  EXPECT_EQ(a->Step().change, Change::kElected);
  EXPECT_EQ(a->terms_won(), 2);
}

TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdStepsDownWithinItsTtlAndTakesTheTermBack) {
  auto reachable = std::make_shared<Switchable>(kv_);
  auto a = Coordinator("a:1", reachable);
  auto b = Coordinator("b:1");
  ASSERT_EQ(a->Step().change, Change::kElected);
  const int64_t term = a->fence()->revision();
  FencedEtcdKv a_writes(reachable, a->fence());

  reachable->down = true;
  clock_.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(a->Step().change, Change::kNone);  // a failed renewal alone does not depose
  EXPECT_TRUE(absl::IsUnavailable(a->last_error())) << a->last_error();
  EXPECT_TRUE(a->leading());
  clock_.Advance(absl::Milliseconds(1500));
  const LeaderElection::Outcome deposed = a->Step();
  EXPECT_EQ(deposed.change, Change::kDeposed);
  EXPECT_THAT(deposed.reason, HasSubstr("could not renew its lease within 3s"));
  EXPECT_TRUE(absl::IsUnavailable(a_writes.Put(key_ + "-x", "y").status()));

  // Nobody else can lead while a's lease lives in etcd ...
  EXPECT_EQ(b->Step().change, Change::kNone);
  EXPECT_EQ(b->leader(), "a:1");
  // ... and a takes the same key back once it reaches etcd again: a new fence, old writes
  // still refused.
  reachable->down = false;
  EXPECT_EQ(a->Step().change, Change::kElected);
  EXPECT_EQ(a->fence()->revision(), term);
  EXPECT_TRUE(absl::IsUnavailable(a_writes.Put(key_ + "-x", "y").status()));
  FencedEtcdKv new_term(reachable, a->fence());
  EXPECT_TRUE(new_term.Put(key_ + "-x", "y").ok());
}

TEST_F(LeaderElectionTest, AFencedTxnWhoseOwnCompareFailsKeepsTheTerm) {
  auto a = Coordinator("a:1");
  ASSERT_EQ(a->Step().change, Change::kElected);
  FencedEtcdKv writes(kv_, a->fence());
  ASSERT_TRUE(writes.Put(key_ + "-job", "v1").ok());
  etcd::TxnRequest create;
  create.compare.push_back(etcd::Compare::Absent(key_ + "-job"));
  create.success.push_back(etcd::Op::Put(key_ + "-job", "v2"));
  create.failure.push_back(etcd::Op::Get(key_ + "-job"));
  absl::StatusOr<etcd::TxnResult> result = writes.Txn(create);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->succeeded);
  ASSERT_EQ(result->gets.size(), 1u);  // the caller's read only
  ASSERT_EQ(result->gets[0].kvs.size(), 1u);
  EXPECT_EQ(result->gets[0].kvs[0].value, "v1");
  EXPECT_EQ(a->fence()->lost(), "");
  EXPECT_EQ(wakes_.load(), 0);
}

TEST_F(LeaderElectionTest, AStandbyThatCannotReadEtcdKnowsNoLeaderAndSaysWhy) {
  auto reachable = std::make_shared<Switchable>(kv_);
  auto a = Coordinator("a:1");
  auto b = Coordinator("b:1", reachable);
  ASSERT_EQ(a->Step().change, Change::kElected);
  ASSERT_EQ(b->Step().change, Change::kNone);
  EXPECT_EQ(b->leader(), "a:1");
  reachable->down = true;
  EXPECT_EQ(b->Step().change, Change::kNone);
  EXPECT_EQ(b->leader(), "");
  EXPECT_THAT(b->last_error().message(), HasSubstr("etcd at"));
}

TEST_F(LeaderElectionTest, AStandbyWaitingOnTheLeaderKeyWakesWhenItGoes) {
  auto a = Coordinator("a:1");
  auto b = Coordinator("b:1");
  EXPECT_TRUE(absl::IsFailedPrecondition(b->AwaitLeaderChange(absl::Seconds(1)).status()));
  ASSERT_EQ(a->Step().change, Change::kElected);
  ASSERT_EQ(b->Step().change, Change::kNone);
  // No change: the wait runs out (renewals do not touch the key).
  clock_.Advance(absl::Milliseconds(1500));
  ASSERT_EQ(a->Step().change, Change::kNone);
  absl::StatusOr<bool> quiet = b->AwaitLeaderChange(absl::Milliseconds(300));
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(*quiet);
  // The leader resigns while b waits: b wakes long before its timeout and wins the next Step.
  absl::StatusOr<bool> changed;
  const absl::Time start = absl::Now();
  std::thread waiter([&] { changed = b->AwaitLeaderChange(absl::Seconds(30)); });
  ASSERT_TRUE(a->Resign().ok());
  waiter.join();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(b->Step().change, Change::kElected);
}

}  // namespace
}  // namespace ringleader
