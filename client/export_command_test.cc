// `ringleader export` (RunExport) against a gMock JobClient and a real checkpoint file.
#include <sstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Return;
using ::testing::StrictMock;

class ExportCommandTest : public ::testing::Test {
 protected:
  ExportCommandTest() {
    env_.out = &out_;
    env_.err = &err_;
  }

  v1::GetJobResponse JobWithCheckpoint(const std::string& path) {
    v1::GetJobResponse response;
    response.mutable_job()->set_job_id("job-000001");
    response.mutable_job()->set_state(v1::JOB_STATE_SUCCEEDED);
    response.mutable_job()->set_checkpoint_path(path);
    return response;
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  CommandEnvironment env_;
};

TEST_F(ExportCommandTest, WritesTheFinalWeightsWithoutTheOptimizerState) {
  const std::string checkpoint = ::testing::TempDir() + "/export_final.ckpt";
  CheckpointData data;
  data.step = 48;
  data.tensors.push_back({"fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}});
  data.tensors.push_back({"fc1.bias", {2}, {0.5f, -0.5f}});
  data.tensors.push_back({"fc1.weight.momentum_buffer", {2, 3}, {9, 9, 9, 9, 9, 9}});
  ASSERT_TRUE(WriteCheckpoint(checkpoint, data).ok());
  EXPECT_CALL(client_, Get("job-000001")).WillOnce(Return(JobWithCheckpoint(checkpoint)));

  const std::string out = ::testing::TempDir() + "/export.safetensors";
  EXPECT_EQ(RunExport("job-000001", out, client_, env_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("wrote the weights of job-000001 (step 48)"));
  absl::StatusOr<std::vector<CheckpointTensor>> tensors = ReadSafetensors(out);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "fc1.weight");
  EXPECT_EQ((*tensors)[0].data, data.tensors[0].data);
  EXPECT_EQ((*tensors)[1].name, "fc1.bias");
}

TEST_F(ExportCommandTest, AJobWithoutAFinalCheckpointSaysWhy) {
  v1::GetJobResponse running = JobWithCheckpoint("");
  running.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  EXPECT_CALL(client_, Get("job-000001")).WillOnce(Return(running));
  EXPECT_EQ(RunExport("job-000001", "x.safetensors", client_, env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("has no final checkpoint (RUNNING)"));
}

TEST_F(ExportCommandTest, AnUnreadableCheckpointIsNamed) {
  EXPECT_CALL(client_, Get("job-000001"))
      .WillOnce(Return(JobWithCheckpoint("/nonexistent/final.ckpt")));
  EXPECT_EQ(RunExport("job-000001", "x.safetensors", client_, env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent/final.ckpt"));
  EXPECT_THAT(err_.str(), HasSubstr("checkpoint_dir is readable"));
}

}  // namespace
}  // namespace ringleader
