// Coordinator core: messages of the ranks (join, key-value store, progress, finish).
#include <vector>

#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AttemptTest : public CoordinatorTest {
 protected:
  // Two workers "a" and "b" and one job of world size 2 assigned to them (not joined).
  void SetUp() override {
    a_ = Register("a");
    b_ = Register("b");
    job_ = Submit(2);
    attempt_ = AttemptId{job_, Generation(1)};
  }
  void JoinBoth() { assignments_ = TakeAndJoin({a_, b_}); }
  // A failed rank's outcome of `kind` (culprit.h HandlingOf decides by it).
  static Coordinator::RankOutcome Failed(const std::string& error, v1::RankFailure::Kind kind) {
    Coordinator::RankOutcome outcome{false, error, ""};
    outcome.failure.set_kind(kind);
    return outcome;
  }
  // A failure that reads as a peer's consequence is held for the peer's own report: let the
  // hold run out, so it ends the attempt.
  void OutwaitTheHold() {
    clock_.Advance(coordinator_.options().peer_failure_grace);
    coordinator_.CheckStaleness();
  }

  WorkerId a_, b_;
  JobId job_;
  AttemptId attempt_;
  std::vector<v1::Assignment> assignments_;
};

TEST_F(AttemptTest, StaleGenerationIsRefusedEverywhere) {
  JoinBoth();
  const AttemptId stale{job_, Generation(2)};
  const std::string expected =
      "stale generation 2 for job job-000001 (current 1): abandon this attempt";
  std::vector<absl::Status> refusals = {
      coordinator_.JoinJob(stale, Rank(0), a_, assignments_[0].spec_fingerprint()),
      coordinator_.KvSet(stale, "k", "v"),
      coordinator_.ReportProgress(stale, Rank(0), {}, {}).status(),
      coordinator_.FinishRank(stale, Rank(0), {true, "", ""}),
  };
  CapturedValue get;
  coordinator_.KvGetAsync(stale, "k", clock_.Now() + absl::Seconds(5), get.Callback());
  ASSERT_EQ(get.calls(), 1);
  refusals.push_back(get.value().status());
  for (const absl::Status& status : refusals) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(status.message(), expected);
  }
  // Nothing the stale attempt sent changed the job.
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(Job(job_).ranks(0).finished());
}

// A QUEUED job has no attempt yet (generation 0). Messages naming generation 0 used to pass the
// generation check: KvSet stored keys and KvGet parked under (job, 0), which no job end clears
// (only the current attempt's store is), so a cancelled queued job left its KvGet waiting until
// its deadline and its keys for the coordinator's lifetime.
TEST_F(CoordinatorTest, AttemptMessagesForAJobWithoutAnAttemptAreRefused) {
  const JobId queued = Submit(2);  // no workers: stays QUEUED
  const AttemptId none{queued, Generation(0)};
  CapturedValue get;
  coordinator_.KvGetAsync(none, "k", clock_.Now() + absl::Seconds(20), get.Callback());
  ASSERT_EQ(get.calls(), 1) << "parked on an attempt that does not exist";
  std::vector<absl::Status> refusals = {
      get.value().status(),
      coordinator_.KvSet(none, "k", "v"),
      coordinator_.JoinJob(none, Rank(0), WorkerId("w-1"), "f"),
      coordinator_.ReportProgress(none, Rank(0), {}, {}).status(),
      coordinator_.FinishRank(none, Rank(0), {false, "x", ""}),
  };
  for (const absl::Status& status : refusals) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(status.message(),
              "job job-000001 has no attempt yet (QUEUED): wait for an assignment");
  }
  ASSERT_TRUE(coordinator_.CancelJob(queued, "").ok());
  EXPECT_EQ(get.calls(), 1);
}

TEST_F(AttemptTest, KvGetWaitsUntilTheKeyIsSet) {
  JoinBoth();
  CapturedValue wanted;
  CapturedValue other;
  coordinator_.KvGetAsync(attempt_, "rank0/addr", clock_.Now() + absl::Seconds(20),
                          wanted.Callback());
  coordinator_.KvGetAsync(attempt_, "rank1/addr", clock_.Now() + absl::Seconds(20),
                          other.Callback());
  EXPECT_EQ(wanted.calls(), 0);
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "rank0/addr", "10.0.0.1:4000").ok());
  ASSERT_EQ(wanted.calls(), 1);
  ASSERT_TRUE(wanted.value().ok());
  EXPECT_EQ(*wanted.value(), "10.0.0.1:4000");
  EXPECT_EQ(other.calls(), 0);  // a different key keeps waiting

  // A key that exists is answered at once.
  CapturedValue again;
  coordinator_.KvGetAsync(attempt_, "rank0/addr", clock_.Now(), again.Callback());
  ASSERT_EQ(again.calls(), 1);
  EXPECT_EQ(*again.value(), "10.0.0.1:4000");
  ASSERT_TRUE(coordinator_.KvSet(attempt_, "rank1/addr", "x").ok());
  EXPECT_EQ(other.calls(), 1);
}

TEST_F(AttemptTest, KvGetRunsOutWithDeadlineExceededNamingTheKey) {
  JoinBoth();
  CapturedValue get;
  coordinator_.KvGetAsync(attempt_, "nccl/unique_id", clock_.Now() + absl::Seconds(5),
                          get.Callback());
  Advance(absl::Seconds(4));
  EXPECT_EQ(get.calls(), 0);
  Advance(absl::Seconds(1));
  ASSERT_EQ(get.calls(), 1);
  EXPECT_EQ(get.value().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(get.value().status().message(), HasSubstr("'nccl/unique_id'"));
}

TEST_F(AttemptTest, KvWaitersFailWhenTheJobEnds) {
  JoinBoth();
  CapturedValue get;
  coordinator_.KvGetAsync(attempt_, "never", clock_.Now() + absl::Seconds(20), get.Callback());
  ASSERT_TRUE(coordinator_.CancelJob(job_, "stop").ok());
  ASSERT_EQ(get.calls(), 1);
  EXPECT_EQ(get.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(get.value().status().message(), HasSubstr("CANCELLED: stop"));
  EXPECT_EQ(coordinator_.KvSet(attempt_, "k", "v").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(AttemptTest, FingerprintMismatchFailsTheJobNamingRankWorkerAndFingerprints) {
  std::optional<v1::Assignment> first = TakeAssignment(a_);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(coordinator_.JoinJob(attempt_, Rank(0), a_, first->spec_fingerprint()).ok());
  const absl::Status status = coordinator_.JoinJob(attempt_, Rank(1), b_, "00000000deadbeef");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  const std::string reason = job.transitions(job.transitions_size() - 1).reason();
  EXPECT_THAT(reason, HasSubstr("rank 1 (worker b on host-b)"));
  EXPECT_THAT(reason, HasSubstr("00000000deadbeef"));
  EXPECT_THAT(reason, HasSubstr(first->spec_fingerprint()));
  EXPECT_EQ(status.message(), reason);
  // Rank 0 had received its assignment: it is told to abort; both workers are free again.
  absl::StatusOr<std::vector<v1::JobAttempt>> aborts = coordinator_.Heartbeat(a_, 1);
  ASSERT_TRUE(aborts.ok());
  ASSERT_EQ(aborts->size(), 1u);
  EXPECT_EQ((*aborts)[0].job_id(), job_.value());
  EXPECT_EQ(Worker(b_).state(), v1::WORKER_STATE_IDLE);
}

TEST_F(AttemptTest, JoinChecksRankRangeAndOwner) {
  std::optional<v1::Assignment> first = TakeAssignment(a_);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(coordinator_.JoinJob(attempt_, Rank(2), a_, first->spec_fingerprint()).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status wrong_owner =
      coordinator_.JoinJob(attempt_, Rank(0), b_, first->spec_fingerprint());
  EXPECT_EQ(wrong_owner.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong_owner.message(), HasSubstr("assigned to worker w-1, not w-2"));
  EXPECT_EQ(coordinator_.JoinJob(AttemptId{JobId("job-000042"), Generation(1)}, Rank(0), a_, "")
                .code(),
            absl::StatusCode::kNotFound);
  // Joining twice is harmless.
  ASSERT_TRUE(coordinator_.JoinJob(attempt_, Rank(0), a_, first->spec_fingerprint()).ok());
  ASSERT_TRUE(coordinator_.JoinJob(attempt_, Rank(0), a_, first->spec_fingerprint()).ok());
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RENDEZVOUS);
}

std::string LastReason(const v1::JobStatus& job) {
  return job.transitions(job.transitions_size() - 1).reason();
}

v1::RankActivity Activity(v1::RankPhase phase, const std::string& detail) {
  v1::RankActivity activity;
  activity.set_phase(phase);
  activity.set_detail(detail);
  return activity;
}

TEST_F(AttemptTest, AFailureNamesTheFrozenRankWithItsEvidenceAndThePhaseOfEveryOtherRank) {
  JoinBoth();
  v1::StepReport step;
  step.set_step(12);
  step.set_collectives(2);
  const v1::RankActivity training = Activity(v1::RANK_PHASE_TRAINING, "step 13");
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(0), {step}, {}, training).ok());
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(1), {step}, {}, training).ok());
  // Rank 1's process is stopped; its daemon heartbeats on and says so. Rank 0 waits in the
  // next collective, sending keepalives.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(0), {}, {}, training).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(a_, 1, "sleeping").ok());
    ASSERT_TRUE(coordinator_.Heartbeat(b_, 1, "stopped").ok());
  }
  clock_.Advance(absl::Milliseconds(250));
  // While it runs, the job's status shows each rank's phase, silence and process state.
  const v1::JobStatus running = Job(job_);
  EXPECT_EQ(running.ranks(1).silent_ms(), 8250);
  EXPECT_EQ(running.ranks(1).process_state(), "stopped");
  EXPECT_EQ(running.ranks(1).activity().phase(), v1::RANK_PHASE_TRAINING);
  EXPECT_EQ(running.ranks(1).activity().phase_elapsed_ms(), 8250);
  EXPECT_EQ(running.ranks(0).silent_ms(), 250);
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(0),
                              {false, "step 13: allreduce bucket 0 timed out after 8s", ""})
                  .ok());
  EXPECT_EQ(LastReason(Job(job_)),
            "rank 0 (worker a on host-a) failed: step 13: allreduce bucket 0 timed out after 8s; "
            "suspect: rank 1 (worker b on host-b) stopped or frozen: silent for 8.2s (last step "
            "12) while its daemon heartbeats (last 250ms ago); process state stopped; last phase "
            "training (step 13) for 8.2s");
}

TEST_F(AttemptTest, ARankWhoseDaemonWentSilentTooIsNamedGone) {
  JoinBoth();
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(0), {}, {}).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(a_, 1).ok());
  }
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(0),
                              Failed("connection closed by peer", v1::RankFailure::PEER_CLOSED))
                  .ok());
  OutwaitTheHold();
  EXPECT_THAT(LastReason(Job(job_)),
              HasSubstr("suspect: rank 1 (worker b on host-b) host or daemon gone: no heartbeat "
                        "from its daemon for 6s, rank process silent for 6s (no step yet)"));
}

TEST_F(AttemptTest, APeerNamedByTheFailingRankIsSuspectedSoonerAndALiveOneIsUnreachable) {
  JoinBoth();
  // 2 s after rank 1 (and its daemon) went quiet: below silent_rank_after, but rank 0 says
  // its peer rank 1 closed the connection.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(0), {}, {}).ok());
  Coordinator::RankOutcome closed =
      Failed("peer closed the connection", v1::RankFailure::PEER_CLOSED);
  closed.failure.set_has_peer(true);
  closed.failure.set_peer_rank(1);
  closed.failure.set_peer_address("10.1.0.2:41729");
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), closed).ok());
  OutwaitTheHold();
  // Its daemon's last heartbeat is 2 s old: within 1.5 heartbeat intervals, so not evidence
  // of a gone host; the text gives the figures.
  EXPECT_THAT(LastReason(Job(job_)),
              HasSubstr("suspect: rank 1 (worker b on host-b) stopped or frozen: silent for 2s "
                        "(no step yet) while its daemon heartbeats (last 2s ago)"));
}

TEST_F(AttemptTest, AnUnreachableLoopbackPeerOnAnotherHostGetsTheFix) {
  JoinBoth();
  const v1::RankActivity connecting = Activity(v1::RANK_PHASE_CONNECTING, "1 peer");
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(1), {}, {}, connecting).ok());
  clock_.Advance(absl::Milliseconds(500));
  Coordinator::RankOutcome refused =
      Failed("could not connect to rank 1 at 127.0.0.1:41729", v1::RankFailure::PEER_CLOSED);
  refused.failure.set_has_peer(true);
  refused.failure.set_peer_rank(1);
  refused.failure.set_peer_address("127.0.0.1:41729");
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), refused).ok());
  OutwaitTheHold();
  EXPECT_EQ(LastReason(Job(job_)),
            "rank 0 (worker a on host-a) failed: could not connect to rank 1 at "
            "127.0.0.1:41729; rank 1's collective address 127.0.0.1:41729 is a loopback address, "
            "but it runs on host-b and the rank that could not reach it on host-a: set the "
            "worker's collective address (ringleader-worker --collective_host=ADDR, or leave it "
            "unset to use the address of the route to the coordinator); other ranks: rank 1 "
            "(worker b on host-b) alive but unreachable at 127.0.0.1:41729, connecting (1 peer) "
            "for 500ms");
}

TEST_F(AttemptTest, AHeldPeerSymptomGivesWayToThePeersOwnFailure) {
  JoinBoth();
  // PyTorch's rank 0 aborts on the connection its peer closed as it died of its own error...
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(0),
                              Failed("command killed by signal 6 (SIGABRT): what():  "
                                     "[./gloo/transport/tcp/pair.cc:598] Connection closed by "
                                     "peer [127.0.0.1]:39332",
                                     v1::RankFailure::PEER_CLOSED))
                  .ok());
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING) << "a symptom is held for its cause";
  clock_.Advance(coordinator_.options().peer_failure_grace / 2);
  coordinator_.CheckStaleness();
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);
  // ... and rank 1's own report, the cause, arrives within the grace.
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(1),
                              Failed("command exited with code 1: ValueError: injected failure",
                                     v1::RankFailure::EXITED))
                  .ok());
  const v1::JobStatus job = Job(job_);
  EXPECT_NE(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(LastReason(job),
              HasSubstr("rank 1 (worker b on host-b) failed: command exited with code 1: "
                        "ValueError: injected failure"));
  EXPECT_THAT(LastReason(job),
              HasSubstr("; before it, as a consequence: rank 0 (worker a on host-a) failed: "
                        "command killed by signal 6 (SIGABRT)"));
  EXPECT_LT(LastReason(job).find("rank 1 (worker b"), LastReason(job).find("rank 0 (worker a"))
      << "the cause comes first: " << LastReason(job);
}

TEST_F(AttemptTest, AHeldPeerSymptomEndsTheAttemptWhenItsGraceRunsOut) {
  JoinBoth();
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(0),
                              Failed("peer rank 1 aborted the collective",
                                     v1::RankFailure::ABORTED_BY_PEER))
                  .ok());
  clock_.Advance(coordinator_.options().peer_failure_grace - absl::Milliseconds(1));
  coordinator_.CheckStaleness();
  EXPECT_EQ(Job(job_).state(), v1::JOB_STATE_RUNNING);
  clock_.Advance(absl::Milliseconds(1));
  coordinator_.CheckStaleness();
  EXPECT_NE(Job(job_).state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(LastReason(Job(job_)),
              HasSubstr("rank 0 (worker a on host-a) failed: peer rank 1 aborted the collective"));
}

TEST_F(AttemptTest, TwoSymptomsEndTheAttemptAtOnceWithTheFirstInFront) {
  JoinBoth();
  ASSERT_TRUE(
      coordinator_
          .FinishRank(attempt_, Rank(1),
                      Failed("Connection reset by peer", v1::RankFailure::PEER_CLOSED))
          .ok());
  ASSERT_TRUE(coordinator_
                  .FinishRank(attempt_, Rank(0),
                              Failed("connection closed by peer", v1::RankFailure::PEER_CLOSED))
                  .ok());
  EXPECT_NE(Job(job_).state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(LastReason(Job(job_)),
              HasSubstr("rank 1 (worker b on host-b) failed: Connection reset by peer"));
  EXPECT_THAT(LastReason(Job(job_)),
              HasSubstr("; then rank 0 (worker a on host-a) failed: connection closed by peer"));
}

TEST_F(AttemptTest, AFailureOfItsOwnEndsTheAttemptAtOnce) {
  JoinBoth();
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), {false, "step 3: NaN loss", ""}).ok());
  EXPECT_NE(Job(job_).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(AttemptTest, AFailureNamesNoSuspectWhileEveryRankIsHeardFrom) {
  JoinBoth();
  clock_.Advance(absl::Seconds(4));  // within silent_rank_after (5 s)
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), {false, "data: file missing", ""}).ok());
  EXPECT_EQ(LastReason(Job(job_)),
            "rank 0 (worker a on host-a) failed: data: file missing");
}

TEST_F(AttemptTest, FailedRankFailsTheJobAndOnlyTheFirstReportCounts) {
  JoinBoth();
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), {false, "step 12: NaN loss", ""}).ok());
  ASSERT_TRUE(coordinator_.FinishRank(attempt_, Rank(0), {true, "", ""}).ok());  // ignored
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.transitions(job.transitions_size() - 1).reason(),
            "rank 0 (worker a on host-a) failed: step 12: NaN loss");
  EXPECT_FALSE(job.ranks(0).ok());
  EXPECT_EQ(job.ranks(0).error(), "step 12: NaN loss");

  // The other rank learns it must stop, and its worker is told to abort.
  absl::StatusOr<Coordinator::StopSignal> stop =
      coordinator_.ReportProgress(attempt_, Rank(1), {}, {});
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(stop->stop);
  EXPECT_THAT(stop->reason, HasSubstr("NaN loss"));
  absl::StatusOr<std::vector<v1::JobAttempt>> aborts = coordinator_.Heartbeat(b_, 1);
  ASSERT_TRUE(aborts.ok());
  EXPECT_EQ(aborts->size(), 1u);
  // The failed rank already finished: nothing to abort there.
  EXPECT_TRUE(coordinator_.Heartbeat(a_, 1)->empty());
}

TEST_F(AttemptTest, ProgressKeepsLatestStepPerRankAndEpochsByEpoch) {
  JoinBoth();
  v1::StepReport step1;
  step1.set_step(1);
  step1.set_loss(2.0);
  step1.set_collectives(2);
  v1::StepReport step2;
  step2.set_step(2);
  step2.set_loss(1.5);
  step2.set_collectives(2);
  v1::EpochReport epoch0;
  epoch0.set_epoch(0);
  epoch0.set_test_accuracy(0.5);
  v1::EpochReport epoch1;
  epoch1.set_epoch(1);
  epoch1.set_test_accuracy(0.7);
  v1::EpochReport epoch0_again = epoch0;
  epoch0_again.set_test_accuracy(0.55);

  const uint64_t version = Job(job_).version();
  absl::StatusOr<Coordinator::StopSignal> stop =
      coordinator_.ReportProgress(attempt_, Rank(0), {step1, step2}, {epoch1});
  ASSERT_TRUE(stop.ok());
  EXPECT_FALSE(stop->stop);
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(0), {}, {epoch0, epoch0_again}).ok());

  const v1::JobStatus job = Job(job_);
  EXPECT_GT(job.version(), version);
  EXPECT_EQ(job.ranks(0).last_step().step(), 2u);
  EXPECT_FALSE(job.ranks(1).has_last_step());
  ASSERT_EQ(job.epochs_size(), 2);
  EXPECT_EQ(job.epochs(0).epoch(), 0u);
  EXPECT_DOUBLE_EQ(job.epochs(0).test_accuracy(), 0.55);
  EXPECT_EQ(job.epochs(1).epoch(), 1u);
}

TEST_F(AttemptTest, TheMemoryARankReportsWithItsFirstStepLandsInItsStatus) {
  JoinBoth();
  v1::StepReport step1;
  step1.set_step(1);
  step1.set_collectives(2);
  v1::RankMemory* memory = step1.mutable_memory();
  memory->set_parameter_bytes(92);
  memory->set_gradient_bytes(96);
  memory->set_optimizer_bytes(48);
  memory->set_comm_buffer_bytes(144);
  memory->set_total_bytes(380);
  v1::StepReport step2;
  step2.set_step(2);
  step2.set_collectives(2);
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(1), {step1}, {}).ok());
  // Later reports carry none: the figures stay.
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(1), {step2}, {}).ok());

  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.ranks(1).last_step().step(), 2u);
  ASSERT_TRUE(job.ranks(1).has_memory());
  EXPECT_EQ(job.ranks(1).memory().parameter_bytes(), 92u);
  EXPECT_EQ(job.ranks(1).memory().gradient_bytes(), 96u);
  EXPECT_EQ(job.ranks(1).memory().optimizer_bytes(), 48u);
  EXPECT_EQ(job.ranks(1).memory().comm_buffer_bytes(), 144u);
  EXPECT_EQ(job.ranks(1).memory().total_bytes(), 380u);
  EXPECT_FALSE(job.ranks(0).has_memory());
}

v1::CollectiveTraceEntry TraceEntry(uint64_t sequence, v1::CollectiveTraceEntry::State state) {
  v1::CollectiveTraceEntry e;
  e.set_sequence(sequence);
  e.set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  e.set_dtype("fp32");
  e.set_bytes(4096);
  e.set_bucket(0);
  e.set_state(state);
  return e;
}

TEST_F(AttemptTest, DebugAsksTheRanksForTheirRingsAndNamesTheSilentOneThatNeverEntered) {
  JoinBoth();
  // Rank 1 last said it had issued collectives #0-#4; then it went silent (stopped).
  v1::RankActivity activity = Activity(v1::RANK_PHASE_TRAINING, "step 2");
  activity.set_collectives_issued(5);
  activity.set_collectives_completed(5);
  ASSERT_TRUE(coordinator_.ReportProgress(attempt_, Rank(1), {}, {}, activity).ok());
  absl::StatusOr<uint64_t> version = coordinator_.RequestTraces(job_);
  ASSERT_TRUE(version.ok()) << version.status();

  // Rank 0's keepalive is answered "send your ring"; it does, and is not asked again.
  clock_.Advance(absl::Seconds(3));
  absl::StatusOr<Coordinator::StopSignal> answer =
      coordinator_.ReportProgress(attempt_, Rank(0), {}, {}, activity);
  ASSERT_TRUE(answer.ok());
  EXPECT_TRUE(answer->send_trace);
  ASSERT_TRUE(coordinator_
                  .ReportTrace(attempt_, Rank(0),
                               {TraceEntry(4, v1::CollectiveTraceEntry::COMPLETED),
                                TraceEntry(5, v1::CollectiveTraceEntry::STARTED)})
                  .ok());
  answer = coordinator_.ReportProgress(attempt_, Rank(0), {}, {}, activity);
  ASSERT_TRUE(answer.ok());
  EXPECT_FALSE(answer->send_trace);
  EXPECT_GT(Job(job_).version(), *version);  // the ring woke the job's watchers

  absl::StatusOr<Coordinator::HangProgress> progress =
      coordinator_.CollectHangReport(job_, /*keep=*/false);
  ASSERT_TRUE(progress.ok());
  EXPECT_FALSE(progress->complete);  // rank 1 has not answered
  progress = coordinator_.CollectHangReport(job_, /*keep=*/true);
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->report.first_sequence(), 5u);
  EXPECT_THAT(progress->report.never_entered(), ElementsAre(1u));
  EXPECT_THAT(progress->report.summary(),
              HasSubstr("rank 1 never entered it (silent 3.0 s; when last heard from, its last "
                        "collective was #4); rank 0 wait in it"));
  // The job keeps the summary and only each rank's entry at #5.
  const v1::JobStatus job = Job(job_);
  EXPECT_EQ(job.hang().summary(), progress->report.summary());
  ASSERT_EQ(job.hang().ranks_size(), 2);
  ASSERT_EQ(job.hang().ranks(0).entries_size(), 1);
  EXPECT_EQ(job.hang().ranks(0).entries(0).sequence(), 5u);
}

TEST_F(AttemptTest, DebugOfAJobWithoutARunningAttemptIsRefused) {
  EXPECT_EQ(coordinator_.RequestTraces(JobId("job-000099")).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(coordinator_.CancelJob(job_, "test").ok());
  EXPECT_EQ(coordinator_.RequestTraces(job_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringleader
