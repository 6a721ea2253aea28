#include "coordinator/core/culprit.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::RankActivity Activity(v1::RankPhase phase, std::string detail, uint64_t elapsed_ms) {
  v1::RankActivity activity;
  activity.set_phase(phase);
  activity.set_detail(std::move(detail));
  activity.set_phase_elapsed_ms(elapsed_ms);
  return activity;
}

// A joined, unfinished rank heard from `silent` ago whose daemon heartbeated `daemon` ago.
RankEvidence Rank(uint32_t rank, absl::Duration silent, absl::Duration daemon,
                  const std::string& host = "") {
  RankEvidence evidence;
  evidence.status.set_rank(rank);
  evidence.status.set_worker_name(absl::StrCat("w", rank));
  evidence.status.set_host(host.empty() ? absl::StrCat("host-", rank) : host);
  evidence.status.set_joined(true);
  evidence.silent = silent;
  evidence.daemon_silent = daemon;
  return evidence;
}

CulpritOptions Options() {
  CulpritOptions options;
  options.silent_after = absl::Seconds(5);
  options.peer_silent_after = absl::Milliseconds(1500);
  options.daemon_silent_after = absl::Seconds(3);
  return options;
}

TEST(ClassifyTest, TellsAliveFrozenGoneFinishedAndNotJoinedApart) {
  const CulpritOptions options = Options();
  EXPECT_EQ(Classify(Rank(1, absl::Seconds(4), absl::Seconds(1)), std::nullopt, options),
            RankCondition::kAlive);
  EXPECT_EQ(Classify(Rank(1, absl::Seconds(6), absl::Seconds(1)), std::nullopt, options),
            RankCondition::kFrozen);
  EXPECT_EQ(Classify(Rank(1, absl::Seconds(6), absl::Seconds(4)), std::nullopt, options),
            RankCondition::kGone);
  RankEvidence unregistered = Rank(1, absl::Seconds(6), absl::Seconds(0));
  unregistered.daemon_silent.reset();
  EXPECT_EQ(Classify(unregistered, std::nullopt, options), RankCondition::kGone);
  RankEvidence finished = Rank(1, absl::Seconds(60), absl::Seconds(60));
  finished.status.set_finished(true);
  EXPECT_EQ(Classify(finished, std::nullopt, options), RankCondition::kFinished);
  RankEvidence never = Rank(1, absl::Seconds(0), absl::Seconds(0));
  never.silent.reset();
  EXPECT_EQ(Classify(never, std::nullopt, options), RankCondition::kNotJoined);
}

TEST(ClassifyTest, APeerNamedByTheFailingRankIsHeldToALowerBar) {
  const CulpritOptions options = Options();
  const RankEvidence quiet = Rank(1, absl::Seconds(2), absl::Milliseconds(2500));
  EXPECT_EQ(Classify(quiet, std::nullopt, options), RankCondition::kAlive);
  EXPECT_EQ(Classify(quiet, PeerBlame{1, "10.0.0.2:4000"}, options), RankCondition::kFrozen);
  EXPECT_EQ(Classify(quiet, PeerBlame{2, "10.0.0.3:4000"}, options), RankCondition::kAlive);
}

TEST(DescribeActivityTest, SaysThePhaseItsDetailAndHowLongItHasLastedByNow) {
  EXPECT_EQ(DescribeActivity(Activity(v1::RANK_PHASE_CONNECTING, "to 1 peer", 14000),
                             absl::Milliseconds(1250)),
            "connecting (to 1 peer) for 15.2s");
  EXPECT_EQ(DescribeActivity(Activity(v1::RANK_PHASE_TRAINING, "", 300), absl::ZeroDuration()),
            "training for 300ms");
  EXPECT_EQ(DescribeActivity(v1::RankActivity(), absl::Seconds(3)), "");
}

TEST(DescribeOtherRanksTest, AStoppedRankIsTheSuspectWithItsEvidenceAndTheWaiterIsAlive) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Milliseconds(300), absl::Milliseconds(200)),
                                     Rank(1, absl::Milliseconds(8200), absl::Milliseconds(400)),
                                     Rank(2, absl::Milliseconds(100), absl::Milliseconds(900))};
  ranks[1].status.mutable_last_step()->set_step(12);
  ranks[1].activity = Activity(v1::RANK_PHASE_TRAINING, "step 13", 100);
  ranks[1].activity_age = absl::Milliseconds(8200);
  ranks[1].process_state = "stopped";
  ranks[2].activity = Activity(v1::RANK_PHASE_TRAINING, "step 13", 8000);
  ranks[2].activity_age = absl::Milliseconds(100);
  EXPECT_EQ(DescribeOtherRanks(ranks, 0, "host-0", std::nullopt, Options()),
            "; suspect: rank 1 (worker w1 on host-1) stopped or frozen: silent for 8.2s (last "
            "step 12) while its daemon heartbeats (last 400ms ago); process state stopped; "
            "last phase training (step 13) for 8.3s; other ranks: rank 2 (worker w2 on host-2) "
            "alive, training (step 13) for 8.1s");
}

TEST(DescribeOtherRanksTest, ARankWhoseDaemonIsSilentTooIsGone) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Milliseconds(100), absl::Milliseconds(100)),
                                     Rank(1, absl::Milliseconds(6000), absl::Milliseconds(6500))};
  const std::string text = DescribeOtherRanks(ranks, 0, "host-0", std::nullopt, Options());
  EXPECT_EQ(text,
            "; suspect: rank 1 (worker w1 on host-1) host or daemon gone: no heartbeat from its "
            "daemon for 6.5s, rank process silent for 6s (no step yet)");
}

TEST(DescribeOtherRanksTest, NoSuspectWhileEveryOtherRankIsHeardFrom) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Seconds(4), absl::Seconds(1)),
                                     Rank(1, absl::Seconds(4), absl::Seconds(1))};
  ranks[1].activity = Activity(v1::RANK_PHASE_LOADING_DATA, "", 1000);
  ranks[1].activity_age = absl::Seconds(1);
  const std::string text = DescribeOtherRanks(ranks, 0, "host-0", std::nullopt, Options());
  EXPECT_THAT(text, Not(HasSubstr("suspect")));
  EXPECT_EQ(text, "; other ranks: rank 1 (worker w1 on host-1) alive, loading data for 2s");
}

TEST(DescribeOtherRanksTest, AnUnreachablePeerThatIsAliveIsNamedUnreachableNotFrozen) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Milliseconds(100), absl::Milliseconds(100)),
                                     Rank(1, absl::Milliseconds(300), absl::Milliseconds(700))};
  ranks[1].activity = Activity(v1::RANK_PHASE_CONNECTING, "1 peer", 14000);
  ranks[1].activity_age = absl::Milliseconds(300);
  const std::string text =
      DescribeOtherRanks(ranks, 0, "host-0", PeerBlame{1, "10.0.0.2:41729"}, Options());
  EXPECT_EQ(text,
            "; other ranks: rank 1 (worker w1 on host-1) alive but unreachable at "
            "10.0.0.2:41729, connecting (1 peer) for 14.3s");
  // A peer named without an address (a shared-memory peer's abort): alive, not unreachable.
  EXPECT_EQ(DescribeOtherRanks(ranks, 0, "host-0", PeerBlame{1, ""}, Options()),
            "; other ranks: rank 1 (worker w1 on host-1) alive, connecting (1 peer) for 14.3s");
}

TEST(DescribeOtherRanksTest, ALoopbackPeerAddressAcrossHostsGetsTheFix) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Milliseconds(100), absl::Milliseconds(100)),
                                     Rank(1, absl::Milliseconds(300), absl::Milliseconds(700))};
  const std::string text =
      DescribeOtherRanks(ranks, 0, "host-0", PeerBlame{1, "127.0.0.1:41729"}, Options());
  EXPECT_THAT(text, HasSubstr("rank 1's collective address 127.0.0.1:41729 is a loopback "
                              "address, but it runs on host-1 and the rank that could not "
                              "reach it on host-0: set the worker's collective address"));
  // The same address on one host is no mistake: no hint.
  ranks[1].status.set_host("host-0");
  EXPECT_THAT(DescribeOtherRanks(ranks, 0, "host-0", PeerBlame{1, "127.0.0.1:41729"}, Options()),
              Not(HasSubstr("loopback")));
}

TEST(DescribeOtherRanksTest, ManyHealthyRanksAreCountedByPhaseAfterTheFirstFew) {
  std::vector<RankEvidence> ranks;
  for (uint32_t r = 0; r < 20; ++r) {
    ranks.push_back(Rank(r, absl::Milliseconds(200), absl::Milliseconds(200)));
    ranks.back().activity = Activity(v1::RANK_PHASE_TRAINING, "step 4", 50 * r);
  }
  ranks[19].silent = absl::Seconds(9);  // the frozen one is named even past the listed ones
  CulpritOptions options = Options();
  options.max_listed = 3;
  const std::string text = DescribeOtherRanks(ranks, 0, "host-0", std::nullopt, options);
  EXPECT_THAT(text, HasSubstr("suspect: rank 19 (worker w19 on host-19) stopped or frozen"));
  EXPECT_THAT(text, HasSubstr("rank 3 (worker w3 on host-3) alive, training (step 4) for 150ms"));
  EXPECT_THAT(text, Not(HasSubstr("rank 4 (worker")));
  EXPECT_THAT(text, HasSubstr("15 more ranks alive, training (step 4)"));
}

TEST(DescribeOtherRanksTest, FinishedAndNeverHeardRanksSaySo) {
  std::vector<RankEvidence> ranks = {Rank(0, absl::Milliseconds(100), absl::Milliseconds(100)),
                                     Rank(1, absl::Seconds(30), absl::Seconds(30)),
                                     Rank(2, absl::Seconds(0), absl::Seconds(0))};
  ranks[1].status.set_finished(true);
  ranks[1].status.set_ok(true);
  ranks[2].silent.reset();
  EXPECT_EQ(DescribeOtherRanks(ranks, 0, "host-0", std::nullopt, Options()),
            "; other ranks: rank 1 (worker w1 on host-1) finished; rank 2 (worker w2 on host-2) "
            "not heard from since it was assigned");
  // Without a failing rank (a rendezvous deadline names the ranks that did not join itself),
  // and a rank alive without a phase has nothing to add.
  EXPECT_EQ(DescribeOtherRanks(ranks, std::nullopt, "", std::nullopt, Options()),
            "; other ranks: rank 1 (worker w1 on host-1) finished");
}

TEST(DescribeLastHeardTest, SaysWhenAndInWhichPhaseALostRankWasLastHeardFrom) {
  RankEvidence rank = Rank(1, absl::Seconds(10), absl::Seconds(10));
  EXPECT_EQ(DescribeLastHeard(rank), "; its rank process was last heard from 10s ago");
  rank.activity = Activity(v1::RANK_PHASE_CHECKPOINTING, "/ckpt/step-100.ckpt", 400);
  EXPECT_EQ(DescribeLastHeard(rank),
            "; its rank process was last heard from 10s ago, writing a checkpoint "
            "(/ckpt/step-100.ckpt)");
  rank.silent.reset();
  EXPECT_EQ(DescribeLastHeard(rank), "");
}

v1::RankFailure FailureOfKind(v1::RankFailure::Kind kind) {
  v1::RankFailure failure;
  failure.set_kind(kind);
  return failure;
}

TEST(HandlingOfTest, APeersFailureIsHeldForItsCauseAndRestartable) {
  for (v1::RankFailure::Kind kind : {v1::RankFailure::PEER_CLOSED,
                                     v1::RankFailure::PEER_TIMED_OUT,
                                     v1::RankFailure::ABORTED_BY_PEER}) {
    const FailureHandling handling = HandlingOf(FailureOfKind(kind));
    EXPECT_TRUE(handling.hold_for_cause) << v1::RankFailure::Kind_Name(kind);
    EXPECT_TRUE(handling.restartable) << v1::RankFailure::Kind_Name(kind);
  }
}

TEST(HandlingOfTest, AJobErrorIsNeverRestartedNorHeld) {
  const FailureHandling handling = HandlingOf(FailureOfKind(v1::RankFailure::JOB_ERROR));
  EXPECT_FALSE(handling.restartable);
  EXPECT_FALSE(handling.hold_for_cause);
}

TEST(HandlingOfTest, ARanksOwnFailureDecidesAtOnceAndIsRestartable) {
  for (v1::RankFailure::Kind kind :
       {v1::RankFailure::KIND_UNSPECIFIED, v1::RankFailure::SIGNAL,
        v1::RankFailure::OUT_OF_MEMORY, v1::RankFailure::IO_ERROR, v1::RankFailure::STOPPED,
        v1::RankFailure::INTERNAL, v1::RankFailure::EXITED}) {
    const FailureHandling handling = HandlingOf(FailureOfKind(kind));
    EXPECT_FALSE(handling.hold_for_cause) << v1::RankFailure::Kind_Name(kind);
    EXPECT_TRUE(handling.restartable) << v1::RankFailure::Kind_Name(kind);
  }
}

TEST(HandlingOfTest, AFailureNamingAPeerIsHeldWhateverItsKind) {
  v1::RankFailure failure = FailureOfKind(v1::RankFailure::INTERNAL);
  failure.set_has_peer(true);
  failure.set_peer_rank(1);
  EXPECT_TRUE(HandlingOf(failure).hold_for_cause);
}

TEST(PeerOfTest, ThePeerAFailureNamesOrNone) {
  EXPECT_FALSE(PeerOf(FailureOfKind(v1::RankFailure::PEER_CLOSED)).has_value());
  v1::RankFailure failure = FailureOfKind(v1::RankFailure::PEER_CLOSED);
  failure.set_has_peer(true);
  failure.set_peer_rank(2);
  failure.set_peer_address("10.1.0.2:41729");
  const std::optional<PeerBlame> peer = PeerOf(failure);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->rank, 2u);
  EXPECT_EQ(peer->address, "10.1.0.2:41729");
}

}  // namespace
}  // namespace ringleader
