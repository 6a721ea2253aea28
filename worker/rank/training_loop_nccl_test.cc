// backend nccl through RunRank with a fake coordinator, on a machine that may have no GPU: the
// rank must fail with a clear FAILED_PRECONDITION "no usable GPU: ..." reported through
// FinishRank, and never create a collective (no rendezvous other ranks could wait on). Bool
// buffers are refused even before the GPU is looked at. Cases that only make sense without a
// GPU skip on a GPU machine (the GPU suite covers the GPU path there).
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gpu/gpu_devices.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/coordinator_client/fake_coordinator.h"
#include "worker/rank/gpu/gpu_model_runner.h"
#include "worker/rank/training_loop.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

bool MachineHasGpu() { return gpu::DetectGpus().ok(); }

v1::JobSpec NcclSpec() {
  v1::JobSpec spec;
  spec.set_name("gpu-job");
  spec.set_world_size(1);
  spec.set_backend("nccl");
  for (uint32_t width : {16u, 8u, 4u}) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(64);
  spec.mutable_data()->set_max_test_examples(32);
  spec.set_epochs(1);
  spec.set_batch_size(16);
  spec.mutable_optimizer()->set_learning_rate(0.05);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

struct Outcome {
  RankRunResult result;
  bool collective_created = false;
  std::unique_ptr<FakeCoordinator> coordinator;
};

Outcome RunNcclRank(const v1::JobSpec& spec, int gpu) {
  Outcome out;
  out.coordinator = std::make_unique<FakeCoordinator>(JobSpecFingerprint(spec));
  v1::Assignment assignment;
  assignment.set_job_id("gpu-job-1");
  assignment.set_generation(1);
  assignment.set_rank(0);
  assignment.set_world_size(1);
  *assignment.mutable_spec() = spec;
  TrainingLoopOptions options;
  options.worker_id = "w0";
  options.gpu = gpu;
  options.log = [](const std::string&) {};
  options.sleep = [](absl::Duration) { ADD_FAILURE() << "an own failure must not wait"; };
  options.make_collective =
      [&out](const v1::Assignment&, const ComputePlacement&,
             const RendezvousProgress&) -> absl::StatusOr<std::unique_ptr<Collective>> {
    out.collective_created = true;
    return absl::InternalError("the test's collective factory must not be reached");
  };
  out.result = RunRank(assignment, out.coordinator.get(), options);
  return out;
}

void ExpectReportedWithoutCollective(const Outcome& out, absl::StatusCode code,
                                     const std::string& text) {
  EXPECT_EQ(out.result.status.code(), code) << out.result.status;
  EXPECT_THAT(std::string(out.result.status.message()), HasSubstr(text));
  EXPECT_FALSE(out.collective_created) << "no rendezvous for a rank that cannot train";
  EXPECT_TRUE(out.result.finish_reported);
  const std::vector<v1::FinishRankRequest> finishes = out.coordinator->finishes(0);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_FALSE(finishes[0].ok());
  EXPECT_THAT(finishes[0].error(), HasSubstr(text));
  EXPECT_TRUE(out.coordinator->steps(0).empty());
  EXPECT_EQ(out.coordinator->probes(), 0) << "reported at once: it is this rank's own failure";
}

TEST(TrainingLoopNcclTest, RankStartedWithoutAGpuFailsNoUsableGpuThroughFinishRank) {
  Outcome out = RunNcclRank(NcclSpec(), /*gpu=*/-1);
  ExpectReportedWithoutCollective(out, absl::StatusCode::kFailedPrecondition,
                                  "no usable GPU: backend nccl runs on GPU workers");
  EXPECT_THAT(out.coordinator->finishes(0)[0].error(), HasSubstr("--gpu N"));
  EXPECT_THAT(out.coordinator->finishes(0)[0].error(), HasSubstr("rank 0: setting up"));
}

TEST(TrainingLoopNcclTest, GpuZeroOnAMachineWithoutGpuFailsWithTheDriversReason) {
  if (MachineHasGpu()) GTEST_SKIP() << "this machine has a GPU: the GPU suite covers nccl here";
  const absl::Status detected = gpu::DetectGpus().status();
  Outcome out = RunNcclRank(NcclSpec(), /*gpu=*/0);
  ExpectReportedWithoutCollective(out, absl::StatusCode::kFailedPrecondition, "no usable GPU: ");
  // The same explanation the worker daemon logs for its own device check.
  EXPECT_THAT(out.coordinator->finishes(0)[0].error(), HasSubstr(std::string(detected.message())));
}

TEST(TrainingLoopNcclTest, CheckUsableGpuAlwaysAnswersFailedPreconditionNoUsableGpu) {
  for (int gpu : {-1, 4096}) {
    absl::Status s = CheckUsableGpu(gpu);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << gpu << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("no usable GPU: ")) << gpu;
  }
  if (!MachineHasGpu()) {
    EXPECT_FALSE(CheckUsableGpu(0).ok());
  }
}

TEST(TrainingLoopNcclTest, BoolBuffersOnNcclAreRefusedBeforeTheGpuOrAnyCollective) {
  v1::JobSpec spec = NcclSpec();
  spec.mutable_model()->set_with_buffers(true);
  // GPU 0 whether or not the machine has one: the refusal comes first either way.
  Outcome out = RunNcclRank(spec, /*gpu=*/0);
  ExpectReportedWithoutCollective(out, absl::StatusCode::kInvalidArgument, "fc1.input_mask");
  EXPECT_THAT(std::string(out.result.status.message()),
              HasSubstr("sync.ignore_bool_buffers: true"));
}

TEST(TrainingLoopNcclTest, IgnoredBoolBuffersGetTheGpuTrainersOwnAnswer) {
  v1::JobSpec spec = NcclSpec();
  spec.mutable_model()->set_with_buffers(true);
  spec.mutable_sync()->set_ignore_bool_buffers(true);
  Outcome out = RunNcclRank(spec, /*gpu=*/0);
  if (MachineHasGpu()) {
    ExpectReportedWithoutCollective(out, absl::StatusCode::kUnimplemented, "model.with_buffers");
  } else {
    ExpectReportedWithoutCollective(out, absl::StatusCode::kFailedPrecondition, "no usable GPU: ");
  }
}

}  // namespace
}  // namespace ringleader
