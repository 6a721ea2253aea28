#include "checkpoint/export.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/checkpoint/test_model.h"
#include "worker/checkpoint/training_state.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name);
}

TEST(ExportTest, WritesModelTensorsWithTorchNamesAndShapesAndSkipsMomentumBuffers) {
  std::unique_ptr<Mlp> model = MakeTestModel({4, 3, 2}, 1, true);
  const CheckpointData checkpoint = CaptureWithMomentum(model.get(), 42, "cafef00d");
  ASSERT_NE(checkpoint.FindTensor(MomentumBufferName("fc2.bias")), nullptr);
  const std::string path = TempPath("export/model.safetensors");
  ASSERT_TRUE(ExportSafetensors(checkpoint, path).ok());

  absl::StatusOr<SafetensorsFile> file = ReadSafetensorsFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{
                                {"format", "pt"},
                                {"ringleader_step", "42"},
                                {"spec_fingerprint", "cafef00d"},
                            }));
  std::vector<std::string> names;
  std::vector<std::vector<uint64_t>> shapes;
  std::vector<std::vector<float>> values;
  for (const CheckpointTensor& t : file->tensors) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
    values.push_back(t.data);
  }
  EXPECT_THAT(names, ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                 "fc1.input_mean", "fc1.input_mask"));
  // nn.Linear(in, out).weight is [out, in].
  EXPECT_THAT(shapes, ElementsAre(ElementsAre(3, 4), ElementsAre(3), ElementsAre(2, 3),
                                  ElementsAre(2), ElementsAre(4), ElementsAre(4)));
  EXPECT_EQ(values, ModelValues(model.get()));
}

// The exported fcK.weight[o][i] is the weight from input i to output o, as in torch: the logits
// computed from the file as W x + b give the model's own loss.
TEST(ExportTest, ExportedWeightIsOutByInLikeTorch) {
  std::unique_ptr<Mlp> model = MakeTestModel({3, 2}, 7, false);  // one layer: logits = W x + b
  const std::string path = TempPath("layout.safetensors");
  ASSERT_TRUE(ExportSafetensors(CaptureWithMomentum(model.get(), 1, "fp"), path).ok());
  absl::StatusOr<SafetensorsFile> file = ReadSafetensorsFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors.size(), 2u);
  const std::vector<float>& w = file->tensors[0].data;  // [2, 3]
  const std::vector<float>& b = file->tensors[1].data;  // [2]

  const float x[3] = {1.0f, -2.0f, 0.5f};
  const int32_t label = 1;
  double logits[2];
  for (int o = 0; o < 2; ++o) {
    logits[o] = b[o];
    for (int i = 0; i < 3; ++i) logits[o] += static_cast<double>(w[3 * o + i]) * x[i];
  }
  const double max = std::max(logits[0], logits[1]);
  const double expected_loss =
      max + std::log(std::exp(logits[0] - max) + std::exp(logits[1] - max)) - logits[label];
  absl::StatusOr<double> loss = model->ForwardBackward(x, &label, 1, {});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, expected_loss, 1e-5);
}

TEST(ExportTest, CheckpointWithoutModelTensorsIsRefused) {
  CheckpointData checkpoint;
  checkpoint.tensors.push_back({MomentumBufferName("fc1.weight"), {1}, {0.5f}});
  const std::string path = TempPath("nothing.safetensors");
  absl::Status s = ExportSafetensors(checkpoint, path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

}  // namespace
}  // namespace ringleader
