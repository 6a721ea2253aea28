// End to end, hang forensics: a rank process stopped (SIGSTOP) between two collectives, while its
// peer waits in the next one. `ringleader debug` must name the stopped rank as never having
// entered that collective and the other rank as waiting in it, over shared memory and over TCP.
//
// The pause fault holds the victim (rank 0) in its checkpoint after step 5, mid-training, while
// its peer goes on into step 6's collectives; the test waits until the coordinator's status
// shows the peer ahead of the victim, stops the victim, and runs the CLI.
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr int kVictim = 0;  // rank 0 writes the checkpoints
constexpr int kPeer = 1;

class HangE2eTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.heartbeat_interval = absl::Milliseconds(200);
    options.kill_grace = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->LogTails(25) << std::endl;
    cluster_.reset();
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_P(HangE2eTest, DebugNamesTheStoppedRankThatNeverEnteredTheCollective) {
  const bool tcp = GetParam();
  v1::JobSpec spec = UntilCancelledSpec(tcp ? "hang-tcp" : "hang-shm");
  // The peer waits while the test looks (the CLI waits 3 s for the silent victim), then gives
  // up: its failure carries the same report.
  spec.set_collective_timeout_ms(10000);
  spec.mutable_sync()->set_shared_memory(!tcp);
  spec.set_checkpoint_dir(absl::StrCat(cluster_->dir(), "/checkpoints"));
  spec.set_checkpoint_interval_steps(5);
  v1::FaultSpec* faults = spec.mutable_model()->mutable_faults();
  faults->set_pause_rank(kVictim);
  faults->set_pause_phase(v1::RANK_PHASE_CHECKPOINTING);
  faults->set_pause_ms(60000);
  absl::StatusOr<std::string> id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();

  // The peer has issued a collective the paused victim has not (their keepalives say so).
  v1::JobStatus seen;
  const absl::Status ahead = WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(*id);
        if (!status.ok()) return false;
        seen = *status;
        if (IsTerminal(seen.state()) || seen.ranks_size() != 2) return IsTerminal(seen.state());
        const v1::RankActivity& victim = seen.ranks(kVictim).activity();
        return victim.phase() == v1::RANK_PHASE_CHECKPOINTING &&
               seen.ranks(kPeer).activity().collectives_issued() > victim.collectives_issued();
      },
      absl::Seconds(60), "the peer ahead of the paused victim");
  ASSERT_TRUE(ahead.ok()) << ahead << "; " << seen.ShortDebugString();
  ASSERT_FALSE(IsTerminal(seen.state())) << LastReason(seen);
  const uint64_t victim_issued = seen.ranks(kVictim).activity().collectives_issued();
  EXPECT_GT(victim_issued, 0u);  // mid-training: five steps of collectives behind it
  const int worker = cluster_->WorkerIndex(seen.ranks(kVictim).worker_name());
  ASSERT_GE(worker, 0);
  const std::vector<ProcessRef> children = cluster_->WorkerChildren(worker);
  ASSERT_THAT(children, SizeIs(1));
  ASSERT_EQ(kill(children[0].pid, SIGSTOP), 0);

  const CliResult cli =
      cluster_->RunCli({"debug", *id, "--wait=3s", "--json"}, absl::Seconds(30));
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  v1::DebugJobResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(cli.output, &response).ok())
      << cli.output;
  const v1::HangReport& report = response.report();
  std::cout << "hang report (" << (tcp ? "tcp" : "shared memory") << "): " << report.summary()
            << std::endl;
  EXPECT_TRUE(report.ranks_disagree());
  EXPECT_EQ(report.first_sequence(), victim_issued);
  EXPECT_THAT(report.never_entered(), ElementsAre(static_cast<uint32_t>(kVictim)));
  EXPECT_THAT(report.summary(), HasSubstr(absl::StrCat("rank ", kVictim, " never entered it (silent")));
  EXPECT_THAT(report.summary(), HasSubstr(absl::StrCat("rank ", kPeer, " wait in it")));
  ASSERT_THAT(report.ranks(), SizeIs(2));
  EXPECT_TRUE(report.ranks(kPeer).answered());
  EXPECT_FALSE(report.ranks(kVictim).answered());
  // The job keeps the report.
  absl::StatusOr<v1::JobStatus> kept = cluster_->GetJob(*id);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->hang().summary(), report.summary());

  // The collective timeout ends the attempt; its reason says where each rank was.
  std::string reasons;
  const absl::Status failed = WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(*id);
        if (!status.ok()) return false;
        reasons.clear();
        for (const v1::StateTransition& t : status->transitions()) reasons += t.reason() + "\n";
        return status->generation() > 1 || IsTerminal(status->state());
      },
      absl::Seconds(40), "the attempt to fail");
  ASSERT_TRUE(failed.ok()) << failed << "\n" << reasons;
  std::cout << "failure reason: " << reasons << std::endl;
  EXPECT_THAT(reasons, HasSubstr(absl::StrCat("in the collectives: collective #", victim_issued)));
  EXPECT_THAT(reasons, HasSubstr(absl::StrCat("rank ", kVictim, " never entered it")));
  EXPECT_THAT(reasons, HasSubstr(absl::StrCat("rank ", kPeer, " waited in it and gave up")));
  kill(children[0].pid, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Transports, HangE2eTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "tcp" : "shared_memory";
                         });

}  // namespace
}  // namespace e2e
}  // namespace ringleader
