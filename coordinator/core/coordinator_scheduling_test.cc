// Coordinator core: submission, FIFO placement, assignments, the job state machine.
#include <vector>

#include "common/job_spec.h"
#include "coordinator/core/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<v1::JobState> States(const v1::JobStatus& job) {
  std::vector<v1::JobState> states;
  for (const v1::StateTransition& t : job.transitions()) states.push_back(t.state());
  return states;
}

TEST_F(CoordinatorTest, AssignsRanksInRegistrationOrderWithFrozenSpec) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const WorkerId c = Register("c");
  EXPECT_EQ(a.value(), "w-1");
  EXPECT_EQ(c.value(), "w-3");
  const JobId job = Submit(2);
  EXPECT_EQ(job.value(), "job-000001");

  std::optional<v1::Assignment> first = TakeAssignment(a);
  std::optional<v1::Assignment> second = TakeAssignment(b);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(TakeAssignment(c).has_value());
  EXPECT_EQ(first->rank(), 0u);
  EXPECT_EQ(second->rank(), 1u);
  for (const v1::Assignment& assignment : {*first, *second}) {
    EXPECT_EQ(assignment.job_id(), "job-000001");
    EXPECT_EQ(assignment.generation(), 1u);
    EXPECT_EQ(assignment.world_size(), 2u);
    // The spec is frozen with its defaults applied, and the fingerprint is of that spec.
    EXPECT_EQ(assignment.spec().strategy(), "ddp");
    EXPECT_EQ(assignment.spec_fingerprint(), JobSpecFingerprint(assignment.spec()));
  }
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(Worker(a).state(), v1::WORKER_STATE_BUSY);
  EXPECT_EQ(Worker(b).rank(), 1u);
  EXPECT_EQ(Worker(c).state(), v1::WORKER_STATE_IDLE);
  // An acknowledged assignment is handed out once (coordinator_reattach_test.cc: one whose
  // answer was lost is handed out again).
  CapturedAssignment acked;
  coordinator_.WaitAssignmentAsync(a, clock_.Now(), acked.Callback(), 0, AttemptOf(*first));
  ASSERT_TRUE(acked.value().ok());
  EXPECT_FALSE(acked.value()->has_value());
}

TEST_F(CoordinatorTest, StrictFifoHeadBlocksSmallerJobsBehindIt) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const JobId big = Submit(3);
  const JobId small = Submit(1);
  EXPECT_EQ(Job(big).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Job(small).state(), v1::JOB_STATE_QUEUED);  // no backfilling

  const WorkerId c = Register("c");
  EXPECT_EQ(Job(big).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(Job(small).state(), v1::JOB_STATE_QUEUED);

  // When the big job ends its workers are free again and the next job is placed on rank 0 = the
  // oldest worker.
  ASSERT_TRUE(coordinator_.CancelJob(big, "make room").ok());
  EXPECT_EQ(Job(small).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_EQ(Job(small).ranks(0).worker_id(), a.value());
  (void)b;
  (void)c;
}

TEST_F(CoordinatorTest, CancellingTheBlockedHeadStartsTheJobBehindIt) {
  const WorkerId a = Register("a");
  const JobId big = Submit(2);
  const JobId small = Submit(1);
  EXPECT_EQ(Job(big).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Job(small).state(), v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(coordinator_.CancelJob(big, "too big").ok());
  // No other submit or registration needed: the cancel itself reschedules.
  EXPECT_EQ(Job(small).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_TRUE(TakeAssignment(a).has_value());
}

TEST_F(CoordinatorTest, AQueuedJobSaysWhyItWaits) {
  Register("a");
  const JobId big = Submit(3);
  const JobId behind = Submit(1);
  EXPECT_EQ(Job(big).queued_reason(),
            "world_size 3 > 1 registered workers: register more workers or lower world_size");
  EXPECT_EQ(Job(behind).queued_reason(),
            absl::StrCat("behind ", big.value(), " (strict FIFO: no job overtakes the queue's "
                         "head)"));
  const JobId gpu = Submit(1, "nccl");
  ASSERT_TRUE(coordinator_.CancelJob(big, "").ok());
  EXPECT_EQ(Job(behind).queued_reason(), "");  // it started
  EXPECT_THAT(Job(gpu).queued_reason(),
              ::testing::StartsWith("needs 1 workers with a cuda device; 0 registered"));
  Register("b");
  Register("c", "cuda");
  EXPECT_EQ(Job(gpu).state(), v1::JOB_STATE_RENDEZVOUS);
  // Both CPU-capable idle workers taken by two 1-rank jobs: a 2-rank job waits for them.
  const JobId two = Submit(3);
  EXPECT_THAT(Job(two).queued_reason(), ::testing::StartsWith("waiting for 3 idle workers: 1 of 3"));
}

TEST_F(CoordinatorTest, SubmitRefusesJobsBeyondTheQueueLimit) {
  CoordinatorOptions options = Options();
  options.max_queued_jobs = 2;
  InMemoryJobStore store;
  Coordinator limited(options, &clock_, &store);
  v1::JobSpec spec;
  spec.set_world_size(1);
  ASSERT_TRUE(limited.SubmitJob(spec).ok());
  ASSERT_TRUE(limited.SubmitJob(spec).ok());
  absl::StatusOr<Coordinator::Submitted> third = limited.SubmitJob(spec);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), ::testing::HasSubstr("--max_queued_jobs"));
}

TEST_F(CoordinatorTest, NcclJobGoesToCudaWorkerGlooJobToAnyWorker) {
  const WorkerId cpu = Register("cpu", "cpu");
  const WorkerId gpu = Register("gpu", "cuda");
  const JobId nccl = Submit(1, "nccl");
  const JobId gloo = Submit(1, "gloo");
  EXPECT_EQ(Job(nccl).ranks(0).worker_id(), gpu.value());
  EXPECT_EQ(Job(gloo).ranks(0).worker_id(), cpu.value());
}

TEST_F(CoordinatorTest, AssignmentsListTheGpusOfTheJobsRanksOnTheirHost) {
  // Host "node1": GPUs 5 and 3; host "node2": a CPU worker and GPU 0, registered interleaved.
  // Ranks are consecutive per host (scheduler.h): node1's are ranks 0 and 1 in registration
  // order, node2's ranks 2 and 3.
  auto add = [this](const std::string& name, const std::string& host, const std::string& kind,
                    int32_t index) {
    v1::Device device;
    device.set_kind(kind);
    device.set_index(index);
    absl::StatusOr<Coordinator::Registration> registration =
        coordinator_.RegisterWorker(name, host, {device}, 1);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? registration->id : WorkerId();
  };
  const std::vector<WorkerId> workers = {add("n1-gpu5", "node1", "cuda", 5),
                                         add("n2-cpu0", "node2", "cpu", 0),
                                         add("n1-gpu3", "node1", "cuda", 3),
                                         add("n2-gpu0", "node2", "cuda", 0)};
  Submit(4);
  const std::vector<v1::Assignment> a = TakeAndJoin(workers);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_THAT(a[0].local_gpus(), ElementsAre(5, 3));
  EXPECT_THAT(a[1].local_gpus(), ElementsAre(5, 3));
  EXPECT_THAT(a[2].local_gpus(), ElementsAre(-1, 0));
  EXPECT_THAT(a[3].local_gpus(), ElementsAre(-1, 0));
  EXPECT_EQ(a[1].local_rank(), 1u);
  EXPECT_EQ(a[3].local_rank(), 1u);
  EXPECT_EQ(a[2].group_rank(), 1u);
  const int32_t own_gpu[] = {5, 3, -1, 0};  // by rank
  for (const v1::Assignment& one : a) {
    EXPECT_EQ(one.local_world_size(), 2u);
    EXPECT_EQ(one.group_world_size(), 2u);
    // Every rank finds its own GPU at its local rank.
    ASSERT_EQ(one.local_gpus_size(), 2);
    EXPECT_EQ(one.local_gpus(static_cast<int>(one.local_rank())), own_gpu[one.rank()]);
  }
}

TEST_F(CoordinatorTest, SuccessfulJobWalksTheStateMachineWithReasonsAndIsSaved) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  const absl::Time submitted = clock_.Now();
  const JobId job = Submit(2);
  clock_.Advance(absl::Seconds(1));
  const std::vector<v1::Assignment> assignments = TakeAndJoin({a, b});
  clock_.Advance(absl::Seconds(1));
  for (const v1::Assignment& assignment : assignments) {
    ASSERT_TRUE(coordinator_
                    .FinishRank(AttemptOf(assignment), Rank(assignment.rank()),
                                {true, "", assignment.rank() == 0 ? "/ckpt/final" : ""})
                    .ok());
  }
  const v1::JobStatus status = Job(job);
  EXPECT_THAT(States(status),
              ElementsAre(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RENDEZVOUS, v1::JOB_STATE_RUNNING,
                          v1::JOB_STATE_SUCCEEDED));
  EXPECT_EQ(status.transitions(0).reason(), "submitted");
  EXPECT_THAT(status.transitions(1).reason(), HasSubstr("rank 0: worker a on host-a"));
  EXPECT_EQ(status.transitions(2).reason(), "all 2 ranks joined");
  EXPECT_EQ(status.transitions(3).reason(), "all 2 ranks finished");
  EXPECT_EQ(status.transitions(0).time_unix_ms(), absl::ToUnixMillis(submitted));
  EXPECT_EQ(status.transitions(2).time_unix_ms(),
            absl::ToUnixMillis(submitted + absl::Seconds(1)));
  EXPECT_EQ(status.transitions(3).time_unix_ms(),
            absl::ToUnixMillis(submitted + absl::Seconds(2)));
  EXPECT_EQ(status.checkpoint_path(), "/ckpt/final");
  EXPECT_EQ(Worker(a).state(), v1::WORKER_STATE_IDLE);
  EXPECT_EQ(Worker(b).state(), v1::WORKER_STATE_IDLE);

  // Every transition (4) and every rank's end (2) reached the store; the last save is the
  // final state.
  EXPECT_EQ(store_.save_count(), 6);
  absl::StatusOr<std::vector<v1::JobStatus>> saved = store_.LoadAll();
  ASSERT_TRUE(saved.ok());
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].state(), v1::JOB_STATE_SUCCEEDED);
  // One log line per transition.
  EXPECT_THAT(log_, testing::Contains(HasSubstr("job job-000001 RUNNING -> SUCCEEDED")));
}

TEST_F(CoordinatorTest, SubmitRejectsAnInvalidSpecNamingTheField) {
  v1::JobSpec spec;  // world_size 0
  absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(submitted.status().message(), HasSubstr("world_size"));
  EXPECT_TRUE(coordinator_.ListJobs().empty());
}

TEST_F(CoordinatorTest, ParkedWaitAssignmentIsAnsweredWhenAJobArrives) {
  const WorkerId a = Register("a");
  CapturedAssignment captured;
  coordinator_.WaitAssignmentAsync(a, clock_.Now() + absl::Seconds(10), captured.Callback());
  EXPECT_EQ(captured.calls(), 0);
  Submit(1);
  ASSERT_EQ(captured.calls(), 1);
  ASSERT_TRUE(captured.value().ok());
  ASSERT_TRUE(captured.value()->has_value());
  EXPECT_EQ((*captured.value())->job_id(), "job-000001");
}

TEST_F(CoordinatorTest, WaitAssignmentDeadlineIsClampedToMaxWait) {
  const WorkerId a = Register("a");
  CapturedAssignment captured;
  coordinator_.WaitAssignmentAsync(a, clock_.Now() + absl::Hours(1), captured.Callback());
  for (int i = 0; i < 29; ++i) {
    ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());  // stays alive
    Advance(absl::Seconds(1));
  }
  EXPECT_EQ(captured.calls(), 0);
  ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());
  Advance(absl::Seconds(1));
  ASSERT_EQ(captured.calls(), 1);
  ASSERT_TRUE(captured.value().ok());
  EXPECT_FALSE(captured.value()->has_value());
}

TEST_F(CoordinatorTest, NewerWaitAssignmentReplacesTheOlder) {
  const WorkerId a = Register("a");
  CapturedAssignment older;
  CapturedAssignment newer;
  coordinator_.WaitAssignmentAsync(a, clock_.Now() + absl::Seconds(10), older.Callback());
  coordinator_.WaitAssignmentAsync(a, clock_.Now() + absl::Seconds(10), newer.Callback());
  ASSERT_EQ(older.calls(), 1);
  EXPECT_FALSE(older.value()->has_value());
  Submit(1);
  ASSERT_EQ(newer.calls(), 1);
  EXPECT_TRUE(newer.value()->has_value());
}

TEST_F(CoordinatorTest, UnknownIdsAreNotFound) {
  CapturedAssignment captured;
  coordinator_.WaitAssignmentAsync(WorkerId("w-9"), clock_.Now(), captured.Callback());
  ASSERT_EQ(captured.calls(), 1);
  EXPECT_EQ(captured.value().status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.Heartbeat(WorkerId("w-9"), 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.GetJob(JobId("job-000009")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_.CancelJob(JobId("job-000009"), "").code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, RegisterRejectsMissingNameAndDevices) {
  v1::Device cpu;
  cpu.set_kind("cpu");
  v1::Device tpu;
  tpu.set_kind("tpu");
  EXPECT_EQ(coordinator_.RegisterWorker("", "h", {cpu}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_.RegisterWorker("a", "h", {}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status bad_kind = coordinator_.RegisterWorker("a", "h", {cpu, tpu}, 1).status();
  EXPECT_EQ(bad_kind.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_kind.message(), HasSubstr("devices[1].kind"));
  EXPECT_TRUE(coordinator_.ListWorkers().empty());
}

TEST_F(CoordinatorTest, RegisterKeepsTheTopologyOrTheHostAndRejectsAMalformedOne) {
  v1::Device cpu;
  cpu.set_kind("cpu");
  const absl::StatusOr<Coordinator::Registration> racked =
      coordinator_.RegisterWorker("a", "h1", {cpu}, 1, std::nullopt, "rack1/node1");
  ASSERT_TRUE(racked.ok()) << racked.status();
  EXPECT_EQ(Worker(racked->id).topology(), "rack1/node1");
  EXPECT_EQ(Worker(racked->id).host(), "h1");
  const absl::StatusOr<Coordinator::Registration> plain =
      coordinator_.RegisterWorker("b", "h2", {cpu}, 1);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Worker(plain->id).topology(), "h2");
  const absl::Status bad =
      coordinator_.RegisterWorker("c", "h3", {cpu}, 1, std::nullopt, "r/h/x").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("topology 'r/h/x' has 3 parts"));
  EXPECT_THAT(bad.message(), HasSubstr("--topology"));
  EXPECT_EQ(coordinator_.ListWorkers().size(), 2u);
}

TEST_F(CoordinatorTest, AJobsRanksArePackedByTopology) {
  v1::Device cpu;
  cpu.set_kind("cpu");
  auto add = [&](const std::string& name, const std::string& topology) {
    absl::StatusOr<Coordinator::Registration> registration =
        coordinator_.RegisterWorker(name, "machine", {cpu}, 1, std::nullopt, topology);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? registration->id : WorkerId();
  };
  // r1/x holds one idle worker, r2/y three: a 3-rank job goes to y alone.
  const WorkerId x0 = add("x0", "r1/x");
  const WorkerId y0 = add("y0", "r2/y");
  const WorkerId y1 = add("y1", "r2/y");
  const WorkerId y2 = add("y2", "r2/y");
  const JobId job = Submit(3);
  const v1::JobStatus status = Job(job);
  ASSERT_EQ(status.ranks_size(), 3);
  EXPECT_EQ(status.ranks(0).worker_id(), y0.value());
  EXPECT_EQ(status.ranks(1).worker_id(), y1.value());
  EXPECT_EQ(status.ranks(2).worker_id(), y2.value());
  EXPECT_EQ(Worker(x0).state(), v1::WORKER_STATE_IDLE);
}

TEST_F(CoordinatorTest, HotSparesAreHeldForTheRunningJobAndTakeALostWorkersRankAtOnce) {
  const WorkerId a = Register("a");
  const WorkerId b = Register("b");
  v1::JobSpec spec;
  spec.set_name("with-a-spare");
  spec.set_world_size(2);
  spec.set_backend("gloo");
  spec.set_max_restarts(1);
  spec.set_spares(1);
  absl::StatusOr<Coordinator::Submitted> submitted = coordinator_.SubmitJob(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const JobId job = submitted->id;
  // Two workers hold the ranks but not the spare: the first attempt waits for a third.
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(Job(job).queued_reason(),
              HasSubstr("world_size 2 + spares 1 > 2 registered workers"));
  const WorkerId c = Register("c");
  EXPECT_EQ(Job(job).state(), v1::JOB_STATE_RENDEZVOUS);
  EXPECT_THAT(Job(job).spare_workers(), ElementsAre("c on host-c"));
  TakeAndJoin({a, b});

  // The spare is placed for no other job.
  const JobId other = Submit(1);
  EXPECT_EQ(Job(other).state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(Job(other).queued_reason(), HasSubstr("1 is held as hot spares by running jobs"));

  // Worker b is lost: the restart takes the spare at once, and holds none left.
  for (int i = 0; i < 3; ++i) {
    Advance(absl::Seconds(5));
    ASSERT_TRUE(coordinator_.Heartbeat(a, 1).ok());
    ASSERT_TRUE(coordinator_.Heartbeat(c, 1).ok());
  }
  EXPECT_EQ(Worker(b).state(), v1::WORKER_STATE_LOST);
  const v1::JobStatus restarted = Job(job);
  EXPECT_EQ(restarted.generation(), 2u);
  EXPECT_EQ(restarted.state(), v1::JOB_STATE_RENDEZVOUS);
  ASSERT_EQ(restarted.ranks_size(), 2);
  EXPECT_EQ(restarted.ranks(0).worker_id(), a.value());
  EXPECT_EQ(restarted.ranks(1).worker_id(), c.value());
  EXPECT_TRUE(restarted.spare_workers().empty());
  EXPECT_EQ(Job(other).state(), v1::JOB_STATE_QUEUED);
}

}  // namespace
}  // namespace ringleader
