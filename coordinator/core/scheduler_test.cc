#include "coordinator/core/scheduler.h"

#include <vector>

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

}  // namespace
}  // namespace ringleader
