#include "coordinator/core/scheduler.h"

#include <vector>

#include "common/topology.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

WorkerRecord MakeWorker(const std::string& name, const std::string& kind,
                        v1::WorkerState state = v1::WORKER_STATE_IDLE) {
  WorkerRecord worker;
  worker.id = WorkerId("id-" + name);
  worker.name = name;
  v1::Device device;
  device.set_kind(kind);
  worker.devices.push_back(device);
  worker.state = state;
  return worker;
}

v1::JobSpec Spec(uint32_t world_size, const std::string& backend) {
  v1::JobSpec spec;
  spec.set_world_size(world_size);
  spec.set_backend(backend);
  return spec;
}

std::vector<std::string> Names(const Placement& placement) {
  std::vector<std::string> names;
  for (const WorkerRecord* worker : placement.ranks) names.push_back(worker->name);
  return names;
}

TEST(CanServeTest, NcclNeedsCudaGlooTakesAnything) {
  const WorkerRecord cpu = MakeWorker("cpu", "cpu");
  const WorkerRecord gpu = MakeWorker("gpu", "cuda");
  EXPECT_FALSE(CanServe(Spec(1, "nccl"), cpu));
  EXPECT_TRUE(CanServe(Spec(1, "nccl"), gpu));
  EXPECT_TRUE(CanServe(Spec(1, "gloo"), cpu));
  EXPECT_TRUE(CanServe(Spec(1, "gloo"), gpu));
}

TEST(PlanFifoTest, RanksFollowWorkerOrderAndSkipBusyWorkers) {
  WorkerRecord a = MakeWorker("a", "cpu");
  WorkerRecord b = MakeWorker("b", "cpu", v1::WORKER_STATE_BUSY);
  WorkerRecord c = MakeWorker("c", "cpu", v1::WORKER_STATE_LOST);
  WorkerRecord d = MakeWorker("d", "cpu");
  WorkerRecord e = MakeWorker("e", "cpu");
  const v1::JobSpec spec = Spec(2, "gloo");
  const std::vector<Placement> plan = PlanFifo({{JobId("j1"), &spec}}, {&a, &b, &c, &d, &e});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].job, JobId("j1"));
  EXPECT_EQ(Names(plan[0]), (std::vector<std::string>{"a", "d"}));
}

TEST(PlanFifoTest, EachWorkerServesOneJob) {
  WorkerRecord a = MakeWorker("a", "cpu");
  WorkerRecord b = MakeWorker("b", "cpu");
  WorkerRecord c = MakeWorker("c", "cpu");
  const v1::JobSpec two = Spec(2, "gloo");
  const v1::JobSpec one = Spec(1, "gloo");
  const std::vector<Placement> plan =
      PlanFifo({{JobId("j1"), &two}, {JobId("j2"), &one}, {JobId("j3"), &one}}, {&a, &b, &c});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(Names(plan[0]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan[1].job, JobId("j2"));
  EXPECT_EQ(Names(plan[1]), (std::vector<std::string>{"c"}));
}

TEST(PlanFifoTest, HeadThatDoesNotFitBlocksTheQueue) {
  WorkerRecord a = MakeWorker("a", "cpu");
  const v1::JobSpec big = Spec(2, "gloo");
  const v1::JobSpec small = Spec(1, "gloo");
  EXPECT_TRUE(PlanFifo({{JobId("big"), &big}, {JobId("small"), &small}}, {&a}).empty());
}

TEST(PlanFifoTest, NcclJobTakesOnlyCudaWorkers) {
  WorkerRecord cpu = MakeWorker("cpu", "cpu");
  WorkerRecord gpu0 = MakeWorker("gpu0", "cuda");
  WorkerRecord gpu1 = MakeWorker("gpu1", "cuda");
  const v1::JobSpec nccl = Spec(2, "nccl");
  const std::vector<Placement> plan = PlanFifo({{JobId("j"), &nccl}}, {&cpu, &gpu0, &gpu1});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(Names(plan[0]), (std::vector<std::string>{"gpu0", "gpu1"}));
}

// A CPU worker at `topology` ("RACK/HOST" or "HOST").
WorkerRecord At(const std::string& name, const std::string& topology,
                v1::WorkerState state = v1::WORKER_STATE_IDLE) {
  WorkerRecord worker = MakeWorker(name, "cpu", state);
  absl::StatusOr<Topology> parsed = ParseTopology(topology);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  worker.topology = *parsed;
  worker.host = worker.topology.host;
  return worker;
}

std::vector<std::string> PlaceOne(uint32_t world_size, std::vector<WorkerRecord>& workers) {
  std::vector<WorkerRecord*> pointers;
  for (WorkerRecord& worker : workers) pointers.push_back(&worker);
  const v1::JobSpec spec = Spec(world_size, "gloo");
  const std::vector<Placement> plan = PlanFifo({{JobId("j"), &spec}}, pointers);
  if (plan.empty()) return {};
  return Names(plan[0]);
}

using Names_ = std::vector<std::string>;

TEST(PackingTest, TakesTheFewestHosts) {
  // The oldest worker's host has one idle worker; another host holds the job alone.
  std::vector<WorkerRecord> workers = {At("a", "h1"), At("b", "h2"), At("c", "h2"),
                                       At("d", "h2")};
  EXPECT_EQ(PlaceOne(3, workers), (Names_{"b", "c", "d"}));
}

TEST(PackingTest, TheSmallestHostThatHoldsTheJobKeepsABigOneWhole) {
  WorkerRecord a = At("a", "big"), b = At("b", "big"), c = At("c", "big"), d = At("d", "big");
  WorkerRecord e = At("e", "small"), f = At("f", "small");
  const v1::JobSpec two = Spec(2, "gloo");
  const v1::JobSpec four = Spec(4, "gloo");
  const std::vector<Placement> plan =
      PlanFifo({{JobId("two"), &two}, {JobId("four"), &four}}, {&a, &b, &c, &d, &e, &f});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(Names(plan[0]), (Names_{"e", "f"}));
  EXPECT_EQ(Names(plan[1]), (Names_{"a", "b", "c", "d"}));
}

TEST(PackingTest, SpansHostsLargestFirstThenTheSmallestThatHoldsTheRest) {
  std::vector<WorkerRecord> workers = {At("m1", "medium"), At("m2", "medium"),
                                       At("l1", "large"),  At("l2", "large"),
                                       At("l3", "large"),  At("s1", "small")};
  // 4 = large (3) + small (1): two hosts, and medium stays whole.
  EXPECT_EQ(PlaceOne(4, workers), (Names_{"l1", "l2", "l3", "s1"}));
}

TEST(PackingTest, ConsecutiveRanksPerHostWhateverTheRegistrationOrder) {
  std::vector<WorkerRecord> workers = {At("a0", "a"), At("b0", "b"), At("a1", "a"),
                                       At("b1", "b")};
  EXPECT_EQ(PlaceOne(4, workers), (Names_{"a0", "a1", "b0", "b1"}));
}

TEST(PackingTest, OneRackWhenItHoldsTheJobOnAsFewHosts) {
  std::vector<WorkerRecord> workers = {At("x0", "r1/x"), At("x1", "r1/x"), At("y0", "r2/y"),
                                       At("y1", "r2/y"), At("z0", "r1/z"), At("z1", "r1/z")};
  // Two hosts either way; r1 holds the job on two, so y (r2) is left out.
  EXPECT_EQ(PlaceOne(4, workers), (Names_{"x0", "x1", "z0", "z1"}));
}

TEST(PackingTest, FewerHostsComeBeforeFewerRacks) {
  std::vector<WorkerRecord> workers = {At("a0", "r1/a"), At("b0", "r1/b"), At("c0", "r1/c"),
                                       At("d0", "r2/d"), At("d1", "r2/d"), At("d2", "r2/d")};
  // r1 holds 3 on three hosts; r2's d alone holds them.
  EXPECT_EQ(PlaceOne(3, workers), (Names_{"d0", "d1", "d2"}));
}

TEST(PackingTest, AcrossRacksTiesGoToARackAlreadyUsedAndRanksStayPerRack) {
  // Five hosts of two workers in three racks, registered interleaved across racks.
  std::vector<WorkerRecord> workers = {
      At("a0", "ra/a"), At("a1", "ra/a"), At("c0", "rb/c"), At("c1", "rb/c"),
      At("e0", "rc/e"), At("e1", "rc/e"), At("b0", "ra/b"), At("b1", "ra/b"),
      At("d0", "rb/d"), At("d1", "rb/d")};
  // Six ranks: three hosts whatever they are; ra's two and one of rb's make two racks.
  EXPECT_EQ(PlaceOne(6, workers), (Names_{"a0", "a1", "b0", "b1", "c0", "c1"}));
}

TEST(PackingTest, TheSameHostNameInTwoRacksIsTwoHosts) {
  std::vector<WorkerRecord> workers = {At("a", "r1/n1"), At("b", "r2/n1"), At("c", "r2/n1")};
  EXPECT_EQ(PlaceOne(2, workers), (Names_{"b", "c"}));
}

TEST(PackingTest, TiesGoToTheOldestAndPlansRepeat) {
  std::vector<WorkerRecord> workers = {At("a0", "r/a"), At("b0", "r/b"), At("a1", "r/a"),
                                       At("b1", "r/b")};
  const Names_ first = PlaceOne(2, workers);
  EXPECT_EQ(first, (Names_{"a0", "a1"}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PlaceOne(2, workers), first);
}

TEST(PackingTest, BusyQuarantinedAndCpuWorkersAreNotPacked) {
  WorkerRecord busy = At("busy", "h1", v1::WORKER_STATE_BUSY);
  WorkerRecord quarantined = At("quarantined", "h1");
  quarantined.quarantine_reason = "slow";
  WorkerRecord cpu = At("cpu", "h1");
  WorkerRecord gpu0 = MakeWorker("gpu0", "cuda");
  gpu0.topology.host = "h1";
  WorkerRecord gpu1 = MakeWorker("gpu1", "cuda");
  gpu1.topology.host = "h2";
  WorkerRecord gpu2 = MakeWorker("gpu2", "cuda");
  gpu2.topology.host = "h2";
  const v1::JobSpec nccl = Spec(2, "nccl");
  std::vector<Placement> plan =
      PlanFifo({{JobId("j"), &nccl}}, {&busy, &quarantined, &cpu, &gpu0, &gpu1, &gpu2});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(Names(plan[0]), (Names_{"gpu1", "gpu2"}));
  // h1 has two idle workers a gloo job may take (cpu, gpu0; not the quarantined one), h2 two:
  // 3 ranks take h1 whole, then one of h2.
  const v1::JobSpec gloo = Spec(3, "gloo");
  plan = PlanFifo({{JobId("j"), &gloo}}, {&busy, &quarantined, &cpu, &gpu0, &gpu1, &gpu2});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(Names(plan[0]), (Names_{"cpu", "gpu0", "gpu1"}));
}

TEST(PackingTest, APinnedJobTakesItsWorkersWhereverTheyAre) {
  WorkerRecord a = At("a", "r1/h1"), b = At("b", "r1/h1"), c = At("c", "r2/h2");
  const v1::JobSpec two = Spec(2, "gloo");
  const std::vector<std::string> pinned = {"a", "c"};
  const std::vector<Placement> plan = PlanFifo({{JobId("doctor"), &two, &pinned}}, {&a, &b, &c});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(Names(plan[0]), (Names_{"a", "c"}));
}

std::vector<std::string> SpareNames(const Placement& placement) {
  std::vector<std::string> names;
  for (const WorkerRecord* worker : placement.spares) names.push_back(worker->name);
  return names;
}

TEST(HotSparesTest, AFirstAttemptWaitsForItsSparesAndIsPlacedWithThem) {
  WorkerRecord a = MakeWorker("a", "cpu");
  WorkerRecord b = MakeWorker("b", "cpu");
  WorkerRecord c = MakeWorker("c", "cpu", v1::WORKER_STATE_BUSY);
  const v1::JobSpec spec = Spec(2, "gloo");
  // Two idle workers hold the ranks, not the spare: it waits, saying why.
  const std::vector<QueuedJob> queue = {{JobId("j"), &spec, nullptr, /*spares=*/1}};
  EXPECT_TRUE(PlanFifo(queue, {&a, &b, &c}).empty());
  const std::string why = WhyQueued(queue, 0, 0, {&a, &b, &c});
  EXPECT_NE(why.find("waiting for 3 idle workers (2 ranks and 1 hot spare): 2 of 3"),
            std::string::npos)
      << why;
  c.state = v1::WORKER_STATE_IDLE;
  const std::vector<Placement> plan = PlanFifo(queue, {&a, &b, &c});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(Names(plan[0]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SpareNames(plan[0]), (std::vector<std::string>{"c"}));
}

TEST(HotSparesTest, ARunningJobsSparesAreHeldFromTheQueueAndARestartNeedsOnlyItsRanks) {
  WorkerRecord a = MakeWorker("a", "cpu", v1::WORKER_STATE_BUSY);
  WorkerRecord b = MakeWorker("b", "cpu");
  WorkerRecord c = MakeWorker("c", "cpu");
  const v1::JobSpec running = Spec(1, "gloo");
  const v1::JobSpec other = Spec(2, "gloo");
  const std::vector<QueuedJob> queue = {{JobId("other"), &other}};
  std::vector<Placement> held;
  EXPECT_TRUE(PlanFifo(queue, {&a, &b, &c}, {{JobId("running"), &running, 1}}, &held).empty());
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].job, JobId("running"));
  EXPECT_EQ(SpareNames(held[0]), (std::vector<std::string>{"b"}));
  const std::string why = WhyQueued(queue, 0, 0, {&a, &b, &c}, held);
  EXPECT_NE(why.find("1 of 3 suitable workers is idle (the others run jobs; 1 is held as hot "
                     "spares by running jobs)"),
            std::string::npos)
      << why;
  // The running job lost worker a: its restart (no spares asked again) takes b at once.
  a.state = v1::WORKER_STATE_LOST;
  const std::vector<Placement> restart =
      PlanFifo({{JobId("running"), &running, nullptr, /*spares=*/0}}, {&a, &b, &c});
  ASSERT_EQ(restart.size(), 1u);
  EXPECT_EQ(Names(restart[0]), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(restart[0].spares.empty());
}

TEST(HotSparesTest, AHoldTakesWhatIsIdleWhenFewerAre) {
  WorkerRecord a = MakeWorker("a", "cpu");
  const v1::JobSpec running = Spec(1, "gloo");
  std::vector<Placement> held;
  EXPECT_TRUE(PlanFifo({}, {&a}, {{JobId("running"), &running, 3}}, &held).empty());
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(SpareNames(held[0]), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace ringleader
