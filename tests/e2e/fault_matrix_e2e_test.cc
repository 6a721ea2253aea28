// End to end, the culprit matrix: a rank process stopped (SIGSTOP) or killed (SIGKILL) in each
// phase of its life — waiting in the rendezvous, connecting to its peer, mid-step, writing a
// checkpoint — must fail the job with a reason that names that rank, with its evidence, and
// never names the healthy rank as a suspect.
//
// The pause fault (spec.model.faults.pause_*) holds the victim in the phase under test; the
// test waits until the coordinator's status shows the victim in that phase (its keepalives say
// so), then sends the signal. Each case prints one row: fault, phase, whether the culprit was
// named correctly, and the time from the signal to the job's FAILED transition.
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr absl::Duration kHeartbeatInterval = absl::Milliseconds(200);
constexpr absl::Duration kHeartbeatTimeout = absl::Seconds(2);
constexpr absl::Duration kKillGrace = absl::Seconds(1);
// The gloo rendezvous (address exchange and connect) and each collective give up after this.
constexpr int kTimeoutSeconds = 5;
// How long the pause fault holds the victim (far longer than any case waits).
constexpr uint32_t kPauseMs = 60000;
constexpr absl::Duration kPhaseTimeout = absl::Seconds(40);
constexpr absl::Duration kJobTimeout = absl::Seconds(40);

struct Case {
  std::string name;
  int signal;
  v1::RankPhase phase;
  int victim;
  // Words of the victim's last phase the reason must quote (SIGSTOP cases).
  std::string phase_words;
  // The ranks talk over gloo's TCP (sync.shared_memory false): the connect phase exists only
  // there. Otherwise they share memory, as two ranks of one host do by default.
  bool tcp = false;
};

class FaultMatrixE2eTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.heartbeat_interval = kHeartbeatInterval;
    options.heartbeat_timeout = kHeartbeatTimeout;
    options.kill_grace = kKillGrace;
    options.worker_flags = {absl::StrCat("--rank_args=--rendezvous_timeout=", kTimeoutSeconds, "s")};
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->LogTails(25) << std::endl;
    cluster_.reset();
  }

  v1::JobSpec Spec(const Case& c) const {
    v1::JobSpec spec = UntilCancelledSpec(absl::StrCat("matrix-", c.name));
    spec.set_collective_timeout_ms(kTimeoutSeconds * 1000);
    spec.set_checkpoint_dir(absl::StrCat(cluster_->dir(), "/checkpoints"));
    spec.set_checkpoint_interval_steps(5);
    v1::FaultSpec* faults = spec.mutable_model()->mutable_faults();
    faults->set_pause_rank(c.victim);
    faults->set_pause_phase(c.phase);
    faults->set_pause_ms(kPauseMs);
    spec.mutable_sync()->set_shared_memory(!c.tcp);
    return spec;
  }

  std::unique_ptr<Cluster> cluster_;
};

std::string Blames(const v1::JobStatus& job, int rank) {
  return absl::StrCat("rank ", rank, " (worker ", job.ranks(rank).worker_name(), " on ");
}

TEST_P(FaultMatrixE2eTest, TheRankHitInThisPhaseIsNamedWithItsEvidence) {
  const Case& c = GetParam();
  absl::StatusOr<std::string> id = cluster_->Submit(Spec(c));
  ASSERT_TRUE(id.ok()) << id.status();

  // Wait until the coordinator sees the victim in the phase (its keepalives carry it).
  v1::JobStatus seen;
  const absl::Status in_phase = WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(*id);
        if (!status.ok()) return false;
        seen = *status;
        if (IsTerminal(seen.state())) return true;
        return seen.ranks_size() == 2 && seen.ranks(c.victim).activity().phase() == c.phase;
      },
      kPhaseTimeout, absl::StrCat("rank ", c.victim, " in ", v1::RankPhase_Name(c.phase)));
  ASSERT_TRUE(in_phase.ok()) << in_phase << "; " << seen.ShortDebugString();
  ASSERT_FALSE(IsTerminal(seen.state())) << LastReason(seen);
  const int worker = cluster_->WorkerIndex(seen.ranks(c.victim).worker_name());
  ASSERT_GE(worker, 0);
  const std::vector<ProcessRef> children = cluster_->WorkerChildren(worker);
  ASSERT_THAT(children, SizeIs(1));

  const absl::Time fault = absl::Now();
  ASSERT_EQ(kill(children[0].pid, c.signal), 0);
  const JobHistory history = cluster_->WaitForEnd(*id, kJobTimeout);
  ASSERT_TRUE(history.ended) << "job " << *id << " did not end";
  const v1::JobStatus& final = history.final;
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED) << LastReason(final);
  const std::string reason = LastReason(final);
  const absl::Duration to_verdict =
      absl::FromUnixMillis(final.transitions().rbegin()->time_unix_ms()) - fault;

  const int healthy = 1 - c.victim;
  const bool culprit_reports = absl::StartsWith(reason, Blames(final, c.victim));
  const bool suspected =
      absl::StrContains(reason, absl::StrCat("suspect: ", Blames(final, c.victim)));
  const bool healthy_suspected =
      absl::StrContains(reason, absl::StrCat("suspect: ", Blames(final, healthy)));
  const bool named = (culprit_reports || suspected) && !healthy_suspected;
  std::cout << "| " << (c.signal == SIGSTOP ? "SIGSTOP" : "SIGKILL") << " | "
            << v1::RankPhase_Name(c.phase) << " | rank " << c.victim << " | "
            << (named ? "named" : "NOT named") << " | " << absl::ToInt64Milliseconds(to_verdict)
            << " ms |\n  reason: " << reason << std::endl;

  EXPECT_TRUE(named) << reason;
  EXPECT_FALSE(healthy_suspected) << reason;
  if (c.signal == SIGKILL) {
    // Its daemon reports the death itself: the reason starts with the culprit.
    EXPECT_THAT(reason, StartsWith(Blames(final, c.victim)));
    EXPECT_THAT(reason, HasSubstr("killed by signal 9 (SIGKILL)"));
  } else {
    // The healthy rank's collective or rendezvous gives up; the stopped rank is the suspect,
    // with the evidence: its daemon alive, its process stopped, its last phase.
    EXPECT_THAT(reason, StartsWith(Blames(final, healthy)));
    EXPECT_THAT(reason, HasSubstr(absl::StrCat("suspect: ", Blames(final, c.victim))));
    EXPECT_THAT(reason, HasSubstr("stopped or frozen"));
    EXPECT_THAT(reason, HasSubstr("process state stopped"));
    EXPECT_THAT(reason, HasSubstr(absl::StrCat("last phase ", c.phase_words)));
  }
  // The collective or rendezvous timeout, the victim's head start, and slack for a loaded
  // machine. A peer stopped while connecting is given up on by gloo's own connect timeout,
  // which the rendezvous timeout does not shorten (measured 25-27 s).
  const absl::Duration timeout = c.phase == v1::RANK_PHASE_CONNECTING && c.signal == SIGSTOP
                                     ? absl::Seconds(30)
                                     : absl::Seconds(kTimeoutSeconds);
  EXPECT_LT(to_verdict, timeout + absl::Seconds(2) + absl::Seconds(8));
  EXPECT_THAT(reason, Not(HasSubstr("not heard from)")));  // the old, unqualified wording
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, FaultMatrixE2eTest,
    ::testing::Values(
        Case{"stop-rendezvous", SIGSTOP, v1::RANK_PHASE_RENDEZVOUS, 1, "in the rendezvous"},
        Case{"stop-connecting", SIGSTOP, v1::RANK_PHASE_CONNECTING, 1, "connecting (to rank 0 at",
             /*tcp=*/true},
        Case{"stop-training", SIGSTOP, v1::RANK_PHASE_TRAINING, 1, "training (step"},
        Case{"stop-checkpointing", SIGSTOP, v1::RANK_PHASE_CHECKPOINTING, 0,
             "writing a checkpoint"},
        Case{"kill-rendezvous", SIGKILL, v1::RANK_PHASE_RENDEZVOUS, 1, ""},
        Case{"kill-connecting", SIGKILL, v1::RANK_PHASE_CONNECTING, 1, "", /*tcp=*/true},
        Case{"stop-training-tcp", SIGSTOP, v1::RANK_PHASE_TRAINING, 1, "training (step", true},
        Case{"kill-training-tcp", SIGKILL, v1::RANK_PHASE_TRAINING, 1, "", true},
        Case{"kill-training", SIGKILL, v1::RANK_PHASE_TRAINING, 1, ""},
        Case{"kill-checkpointing", SIGKILL, v1::RANK_PHASE_CHECKPOINTING, 0, ""}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.name;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace e2e
}  // namespace ringleader
