#include "worker/checkpoint/training_state.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

SgdOptions Options() {
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-3;
  return o;
}

// One training step on `batch` examples starting at `first`.
void StepOn(const Dataset& d, size_t first, size_t batch, Mlp* model, SgdOptimizer* opt) {
  model->ZeroGradients();
  ASSERT_TRUE(model->ForwardBackward(d.example(first), d.y.data() + first, batch, {}).ok());
  std::vector<float*> params;
  std::vector<const float*> grads;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    params.push_back(model->param(i));
    grads.push_back(model->grad(i));
  }
  opt->Step(params, grads, std::vector<bool>(params.size(), true));
}

std::vector<float> Flat(const Mlp& m) {
  std::vector<float> out;
  for (size_t i = 0; i < m.parameters().size(); ++i) {
    out.insert(out.end(), m.param(i), m.param(i) + m.parameters()[i].count);
  }
  return out;
}

TEST(TrainingStateTest, ResumeFromCheckpointContinuesBitForBit) {
  const Dataset d = MakeSyntheticDataset(64, 8, 3, 2);
  Mlp original({8, 6, 3}, 1, MlpOptions{true});
  SgdOptimizer original_opt(original.parameters(), Options());
  StepOn(d, 0, 16, &original, &original_opt);
  StepOn(d, 16, 16, &original, &original_opt);
  static_cast<bool*>(original.buffers()[1].data)[3] = false;  // a non-default mask survives

  const std::string path = absl::StrCat(::testing::TempDir(), "/state.ckpt");
  ASSERT_TRUE(WriteCheckpoint(path, CaptureTrainingState(&original, original_opt, 2, 0, "fp"))
                  .ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_NE(read->FindTensor("fc1.weight.momentum_buffer"), nullptr);
  EXPECT_NE(read->FindTensor("fc1.input_mean"), nullptr);

  Mlp resumed({8, 6, 3}, 99, MlpOptions{true});  // other seed: everything must come from disk
  SgdOptimizer resumed_opt(resumed.parameters(), Options());
  ASSERT_TRUE(RestoreTrainingState(*read, "fp", &resumed, &resumed_opt).ok());
  EXPECT_EQ(resumed_opt.step_count(), 2u);
  EXPECT_EQ(Flat(resumed), Flat(original));
  EXPECT_FALSE(static_cast<bool*>(resumed.buffers()[1].data)[3]);

  StepOn(d, 32, 16, &original, &original_opt);
  StepOn(d, 32, 16, &resumed, &resumed_opt);
  EXPECT_EQ(Flat(resumed), Flat(original));
  EXPECT_EQ(resumed_opt.momentum_buffers(), original_opt.momentum_buffers());
  const float* a = static_cast<const float*>(original.buffers()[0].data);
  const float* b = static_cast<const float*>(resumed.buffers()[0].data);
  EXPECT_EQ(std::vector<float>(a, a + 8), std::vector<float>(b, b + 8));
}

TEST(TrainingStateTest, MismatchedModelOrSpecIsRefusedAndChangesNothing) {
  Mlp small({8, 6, 3}, 1);
  SgdOptimizer small_opt(small.parameters(), Options());
  const CheckpointData data = CaptureTrainingState(&small, small_opt, 5, 1, "fp");

  Mlp wider({8, 7, 3}, 2);
  SgdOptimizer wider_opt(wider.parameters(), Options());
  const std::vector<float> before = Flat(wider);
  absl::Status s = RestoreTrainingState(data, "", &wider, &wider_opt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fc1.weight"));
  EXPECT_EQ(Flat(wider), before);

  Mlp same({8, 6, 3}, 2);
  SgdOptimizer same_opt(same.parameters(), Options());
  s = RestoreTrainingState(data, "other-fingerprint", &same, &same_opt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fingerprint"));

  Mlp buffered({8, 6, 3}, 2, MlpOptions{true});
  SgdOptimizer buffered_opt(buffered.parameters(), Options());
  s = RestoreTrainingState(data, "fp", &buffered, &buffered_opt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fc1.input_mean"));
}

}  // namespace
}  // namespace ringleader
