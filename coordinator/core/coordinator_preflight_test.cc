// Pre-flight checks and quarantine in the coordinator core: RunDoctor, checks.preflight, the
// crash streak, uncordon and placement around quarantined workers (fake clock).
#include <deque>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using CapturedResult = Captured<absl::StatusOr<v1::PreflightResult>>;

v1::PreflightReport Figures(double gflops, const std::vector<std::pair<uint32_t, uint32_t>>& pairs,
                            bool pairs_ok = true) {
  v1::PreflightReport report;
  report.set_gflops(gflops);
  for (const auto& [a, b] : pairs) {
    v1::PreflightPairReport* pair = report.add_pairs();
    pair->set_rank_a(a);
    pair->set_rank_b(b);
    pair->set_ok(pairs_ok);
    if (pairs_ok) pair->set_bandwidth_mb_per_s(1000);
    if (!pairs_ok) pair->set_error("timed out waiting for rank 1");
  }
  return report;
}

class CoordinatorPreflightTest : public CoordinatorTest {
 protected:
  // Parked doctor runs are answered before their captures go.
  ~CoordinatorPreflightTest() override { coordinator_.Shutdown(); }

  // Starts a doctor run on `names` (empty: every idle worker); its answer lands in the result.
  CapturedResult& Doctor(const std::vector<std::string>& names, double min_fraction = 0.5,
                         absl::Duration wait = absl::Seconds(30)) {
    CapturedResult& captured = results_.emplace_back();
    coordinator_.RunDoctorAsync({names, min_fraction}, clock_.Now() + wait,
                                captured.Callback());
    return captured;
  }

  std::deque<CapturedResult> results_;

  // Every rank reports `figures[r]` and finishes ok.
  void ReportAndFinish(const std::vector<v1::Assignment>& assignments,
                       const std::vector<v1::PreflightReport>& figures) {
    for (const v1::Assignment& a : assignments) {
      ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(a), Rank(a.rank()), figures[a.rank()])
                      .ok());
    }
    for (const v1::Assignment& a : assignments) {
      ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(a), Rank(a.rank()), {true}).ok());
    }
  }

  // A failed rank's outcome: `error`, of `kind`.
  static Coordinator::RankOutcome Failed(const std::string& error,
                                         v1::RankFailure::Kind kind = v1::RankFailure::SIGNAL) {
    Coordinator::RankOutcome outcome{false, error};
    outcome.failure.set_kind(kind);
    return outcome;
  }

  // A rank of a one-rank job (no restart) on `worker` fails with `outcome`.
  void FailOnce(const WorkerId& worker, Coordinator::RankOutcome outcome) {
    const JobId job = Submit(1, "gloo", /*max_restarts=*/0);
    const std::vector<v1::Assignment> assignments = TakeAndJoin({worker});
    ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(assignments[0]), Rank(0), outcome).ok());
    EXPECT_EQ(Job(job).state(), v1::JOB_STATE_FAILED);
  }
};

TEST_F(CoordinatorPreflightTest, DoctorNamesAndQuarantinesTheSlowWorker) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  const WorkerId w2 = Register("w2");
  CapturedResult& result = Doctor({});
  const std::vector<v1::Assignment> assignments = TakeAndJoin({w0, w1, w2});
  ASSERT_EQ(assignments[0].spec().model().kind(), kPreflightModelKind);
  EXPECT_EQ(assignments[0].world_size(), 3u);
  EXPECT_EQ(result.calls(), 0);
  ReportAndFinish(assignments, {Figures(10, {{0, 1}, {0, 2}}), Figures(10, {{0, 1}, {1, 2}}),
                                Figures(2, {{0, 2}, {1, 2}})});

  ASSERT_EQ(result.calls(), 1);
  ASSERT_TRUE(result.value().ok()) << result.value().status();
  const v1::PreflightResult& judged = *result.value();
  EXPECT_FALSE(judged.clean());
  EXPECT_TRUE(judged.error().empty());
  EXPECT_TRUE(judged.workers(2).quarantined());
  EXPECT_FALSE(judged.workers(0).quarantined());
  EXPECT_EQ(Worker(w2).state(), v1::WORKER_STATE_QUARANTINED);
  EXPECT_THAT(Worker(w2).quarantine_reason(), HasSubstr("matmul 2 GFLOP/s, 0.20 of the median"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_IDLE);
  EXPECT_TRUE(Worker(w0).quarantine_reason().empty());
  EXPECT_EQ(Job(JobId(judged.job_id())).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(CoordinatorPreflightTest, QuarantinedWorkerIsSkippedUntilUncordoned) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  const WorkerId w2 = Register("w2");
  CapturedResult& result = Doctor({});
  ReportAndFinish(TakeAndJoin({w0, w1, w2}),
                  {Figures(10, {}), Figures(1, {}), Figures(10, {})});
  ASSERT_EQ(Worker(w1).state(), v1::WORKER_STATE_QUARANTINED);

  const JobId job = Submit(3);
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(Job(job).queued_reason(), HasSubstr("1 quarantined (w1)"));
  EXPECT_THAT(Job(job).queued_reason(), HasSubstr("ringleader uncordon"));
  // A job that fits the others runs there.
  absl::StatusOr<v1::WorkerStatus> released = coordinator_.UncordonWorker("w1");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->quarantine_reason().empty());
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(Worker(w1).state(), v1::WORKER_STATE_BUSY);
}

TEST_F(CoordinatorPreflightTest, TwoWorkersWithAFailingPairQuarantineNobody) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  CapturedResult& result = Doctor({"w0", "w1"});
  ReportAndFinish(TakeAndJoin({w0, w1}),
                  {Figures(10, {{0, 1}}, false), Figures(10, {{0, 1}}, false)});
  ASSERT_EQ(result.calls(), 1);
  ASSERT_TRUE(result.value().ok());
  EXPECT_THAT(result.value()->findings(0), HasSubstr("cannot be told"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_IDLE);
  EXPECT_EQ(Worker(w1).state(), v1::WORKER_STATE_IDLE);
}

TEST_F(CoordinatorPreflightTest, DoctorRunsOnlyOnTheNamedWorkersAheadOfTheQueue) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  const WorkerId w2 = Register("w2");
  const JobId big = Submit(4);  // waits for a fourth worker, at the head of the queue
  CapturedResult& result = Doctor({"w2", "w0"});
  EXPECT_FALSE(TakeAssignment(w1).has_value());
  const std::vector<v1::Assignment> assignments = TakeAndJoin({w0, w2});
  EXPECT_EQ(assignments[0].world_size(), 2u);
  EXPECT_EQ(Job(big).state(), v1::JOB_STATE_QUEUED);
}

TEST_F(CoordinatorPreflightTest, DoctorRefusesBadRequests) {
  const WorkerId w0 = Register("w0");
  Register("w1");
  CapturedResult& unknown = Doctor({"nope"});
  EXPECT_EQ(unknown.value().status().code(), absl::StatusCode::kNotFound);
  CapturedResult& twice = Doctor({"w0", "w0"});
  EXPECT_EQ(twice.value().status().code(), absl::StatusCode::kInvalidArgument);
  CapturedResult& fraction = Doctor({"w0"}, 1.5);
  EXPECT_EQ(fraction.value().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fraction.value().status().message(), HasSubstr("min_fraction"));
  Submit(1);
  ASSERT_TRUE(TakeAssignment(w0).has_value());
  CapturedResult& busy = Doctor({"w0"});
  EXPECT_EQ(busy.value().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.value().status().message(), HasSubstr("w0 is BUSY"));
}

TEST_F(CoordinatorPreflightTest, DoctorWaitRunsOutNamingTheJob) {
  const WorkerId w0 = Register("w0");
  CapturedResult& result = Doctor({"w0"}, 0.5, absl::Seconds(5));
  Advance(absl::Seconds(4));
  EXPECT_EQ(result.calls(), 0);
  Advance(absl::Seconds(2));
  ASSERT_EQ(result.calls(), 1);
  EXPECT_EQ(result.value().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.value().status().message(), HasSubstr("job-000001"));
}

TEST_F(CoordinatorPreflightTest, DoctorWhoseRankFailedAnswersWithTheError) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  CapturedResult& result = Doctor({});
  const std::vector<v1::Assignment> assignments = TakeAndJoin({w0, w1});
  ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(assignments[0]), Rank(0), Figures(10, {}))
                  .ok());
  ASSERT_TRUE(coordinator_
                  .FinishRank(AttemptOf(assignments[1]), Rank(1),
                              Failed("sgemm: out of memory", v1::RankFailure::OUT_OF_MEMORY))
                  .ok());
  ASSERT_EQ(result.calls(), 1);
  ASSERT_TRUE(result.value().ok());
  EXPECT_THAT(result.value()->error(), HasSubstr("sgemm: out of memory"));
  EXPECT_FALSE(result.value()->workers(1).reported());
  EXPECT_FALSE(result.value()->clean());
}

TEST_F(CoordinatorPreflightTest, PreflightJobIsPlacedAgainWithoutTheBadWorker) {
  const WorkerId w0 = Register("w0");
  const WorkerId w1 = Register("w1");
  const WorkerId w2 = Register("w2");
  v1::JobSpec spec;
  spec.set_world_size(2);
  spec.set_max_restarts(0);
  spec.mutable_checks()->set_preflight(true);
  absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const JobId job = submitted->id;
  std::vector<v1::Assignment> first = TakeAndJoin({w0, w1});
  ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(first[0]), Rank(0), Figures(10, {})).ok());
  ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(first[1]), Rank(1), Figures(1, {})).ok());

  EXPECT_EQ(Worker(w1).state(), v1::WORKER_STATE_QUARANTINED);
  const v1::JobStatus placed_again = Job(job);
  EXPECT_EQ(placed_again.state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(placed_again.generation(), 2u);
  EXPECT_EQ(placed_again.restarts(), 0u);  // max_restarts 0, and still placed again
  EXPECT_THAT(placed_again.transitions(placed_again.transitions_size() - 2).reason(),
              HasSubstr("the pre-flight check quarantined w1"));

  std::vector<v1::Assignment> second = TakeAndJoin({w0, w2});
  EXPECT_EQ(second[1].rank(), 1u);
  CapturedValue verdict;
  const std::string key = absl::StrCat(job.value(), "/2/preflight/verdict");
  coordinator_.KvGetAsync(AttemptOf(second[0]), key, clock_.Now() + absl::Seconds(10),
                          verdict.Callback());
  ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(second[0]), Rank(0), Figures(10, {})).ok());
  EXPECT_EQ(verdict.calls(), 0);
  ASSERT_TRUE(coordinator_.ReportPreflight(AttemptOf(second[1]), Rank(1), Figures(9, {})).ok());
  ASSERT_EQ(verdict.calls(), 1);
  ASSERT_TRUE(verdict.value().ok()) << verdict.value().status();
  EXPECT_EQ(*verdict.value(), "pass");
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(CoordinatorPreflightTest, PreflightFiguresForAJobWithoutTheCheckAreRefused) {
  const WorkerId w0 = Register("w0");
  Submit(1);
  const std::vector<v1::Assignment> assignments = TakeAndJoin({w0});
  EXPECT_EQ(coordinator_.ReportPreflight(AttemptOf(assignments[0]), Rank(0), Figures(1, {}))
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CoordinatorPreflightTest, TwoOwnFailuresInARowQuarantine) {
  const WorkerId w0 = Register("w0");
  FailOnce(w0, Failed("rank process killed by signal 11 (SIGSEGV)"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_IDLE);
  FailOnce(w0, Failed("rank process killed by signal 11 (SIGSEGV)"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_QUARANTINED);
  EXPECT_THAT(Worker(w0).quarantine_reason(), HasSubstr("failed 2 attempts in a row"));
  EXPECT_THAT(Worker(w0).quarantine_reason(), HasSubstr("job-000002 generation 1 rank 0"));
}

TEST_F(CoordinatorPreflightTest, JobErrorsPeerSymptomsAndStopsNeitherCountNorBreakTheStreak) {
  const WorkerId w0 = Register("w0");
  FailOnce(w0, Failed("killed by signal 9"));
  FailOnce(w0, Failed("model.kind: not supported", v1::RankFailure::JOB_ERROR));
  // A user's script raising an exception (exit code 1) twice says nothing about the machine.
  FailOnce(w0, Failed("command exited with code 1: ValueError", v1::RankFailure::EXITED));
  FailOnce(w0, Failed("command exited with code 1: ValueError", v1::RankFailure::EXITED));
  FailOnce(w0, Failed("bug", v1::RankFailure::INTERNAL));
  FailOnce(w0, Failed("Connection closed by peer", v1::RankFailure::PEER_CLOSED));
  FailOnce(w0, Failed("stopped by the coordinator", v1::RankFailure::STOPPED));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_IDLE);
  FailOnce(w0, Failed("killed by signal 9"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_QUARANTINED);
}

TEST_F(CoordinatorPreflightTest, ASuccessBreaksTheStreak) {
  const WorkerId w0 = Register("w0");
  FailOnce(w0, Failed("killed by signal 9"));
  Submit(1);
  const std::vector<v1::Assignment> ok = TakeAndJoin({w0});
  ASSERT_TRUE(coordinator_.FinishRank(AttemptOf(ok[0]), Rank(0), {true}).ok());
  FailOnce(w0, Failed("killed by signal 9"));
  EXPECT_EQ(Worker(w0).state(), v1::WORKER_STATE_IDLE);
}

TEST_F(CoordinatorPreflightTest, QuarantineSurvivesADaemonRestart) {
  const WorkerId w0 = Register("w0");
  FailOnce(w0, Failed("killed by signal 9"));
  FailOnce(w0, Failed("killed by signal 9"));
  const WorkerId again = Register("w0", "cpu", /*incarnation=*/2);
  EXPECT_NE(again, w0);
  EXPECT_EQ(Worker(again).state(), v1::WORKER_STATE_QUARANTINED);
  const JobId job = Submit(1);
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
}

TEST_F(CoordinatorPreflightTest, UncordonRefusesUnknownAndHealthyWorkers) {
  Register("w0");
  EXPECT_EQ(coordinator_.UncordonWorker("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.UncordonWorker("w0").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringleader
