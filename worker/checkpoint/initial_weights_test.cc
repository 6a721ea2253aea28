#include "worker/checkpoint/initial_weights.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/export.h"
#include "checkpoint/file_io.h"
#include "checkpoint/shard_test_util.h"
#include "checkpoint/sharded_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/checkpoint/test_model.h"
#include "worker/checkpoint/training_state.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSourceSeed = 1;
constexpr uint64_t kTargetSeed = 2;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name);
}

// Writes the checkpoint a job would write for `model` (with momentum buffers, step 5).
std::string WriteTrainedCheckpoint(Mlp* model, const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteCheckpoint(path, CaptureWithMomentum(model, 5, "fingerprint")).ok());
  return path;
}

std::string WriteExported(Mlp* model, const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(ExportSafetensors(CaptureWithMomentum(model, 5, "fingerprint"), path).ok());
  return path;
}

TEST(InitialWeightsTest, LoadsARingleaderCheckpointIgnoringMomentumBuffers) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, true);
  const std::string path = WriteTrainedCheckpoint(source.get(), "trained.ckpt");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->step, 5u);
  EXPECT_EQ(weights->attributes.at(kInitFromPathAttribute), path);
  ASSERT_NE(weights->FindTensor(MomentumBufferName("fc1.weight")), nullptr);

  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  ASSERT_NE(ModelValues(target.get()), ModelValues(source.get()));
  ASSERT_TRUE(CheckInitialWeights(*weights, target.get()).ok());
  ASSERT_TRUE(LoadInitialWeights(*weights, target.get()).ok());
  EXPECT_EQ(ModelValues(target.get()), ModelValues(source.get()));
}

TEST(InitialWeightsTest, LoadsASafetensorsFileRecognisedByItsContent) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, true);
  const std::string path = WriteExported(source.get(), "exported_weights.bin");  // no extension
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->step, 0u) << "a new training";
  EXPECT_EQ(weights->spec_fingerprint, "");
  EXPECT_EQ(weights->attributes.at("format"), "pt");
  EXPECT_EQ(weights->attributes.at(kInitFromPathAttribute), path);

  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  ASSERT_TRUE(LoadInitialWeights(*weights, target.get()).ok());
  EXPECT_EQ(ModelValues(target.get()), ModelValues(source.get()));
}

TEST(InitialWeightsTest, ContentDecidesOverTheExtension) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, false);
  const std::string path = WriteTrainedCheckpoint(source.get(), "misnamed.safetensors");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->step, 5u) << "read as a ringleader checkpoint";
  EXPECT_EQ(weights->spec_fingerprint, "fingerprint");
}

TEST(InitialWeightsTest, MissingForeignAndDamagedFilesAreRefusedNamingThePath) {
  const std::string missing = TempPath("absent_weights");
  EXPECT_EQ(ReadInitialWeights(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ReadInitialWeights(missing).status().message()), HasSubstr(missing));

  const std::string text = TempPath("notes.txt");
  ASSERT_TRUE(WriteFileAtomically("test file", text, "some notes, not weights").ok());
  absl::Status s = ReadInitialWeights(text).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(),
            absl::StrCat("init_from ", text,
                         " is neither a ringleader checkpoint (which starts with RLCKPT01) nor a "
                         "safetensors file (whose JSON header starts at byte 8 with '{')"));

  // Too short to tell by content: the name and the magic's prefix send it to the reader that
  // reports the truncation.
  const std::string cut_safetensors = TempPath("cut.safetensors");
  ASSERT_TRUE(WriteFileAtomically("test file", cut_safetensors, std::string("\x10\0\0", 3)).ok());
  s = ReadInitialWeights(cut_safetensors).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("safetensors file " + cut_safetensors));
  const std::string cut_checkpoint = TempPath("cut.ckpt");
  ASSERT_TRUE(WriteFileAtomically("test file", cut_checkpoint, "RLCK").ok());
  s = ReadInitialWeights(cut_checkpoint).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("checkpoint " + cut_checkpoint));
}

TEST(InitialWeightsTest, ShapeMismatchNamesTheTensorAndBothShapesAndChangesNothing) {
  // fc1 fits, fc2 does not: a partial copy would change fc1.
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 5}, kSourceSeed, true);
  const std::string path = WriteExported(source.get(), "wider.safetensors");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();

  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  const std::vector<std::vector<float>> before = ModelValues(target.get());
  const std::string expected = absl::StrCat(
      "init_from ", path, ": fc2.weight has shape [5, 3] in the file but [2, 3] in the model");
  absl::Status check = CheckInitialWeights(*weights, target.get());
  EXPECT_EQ(check.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(check.message(), expected);
  absl::Status load = LoadInitialWeights(*weights, target.get());
  EXPECT_EQ(load.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(load.message(), expected);
  EXPECT_EQ(ModelValues(target.get()), before);
}

TEST(InitialWeightsTest, MissingTensorIsRefusedAndChangesNothing) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, false);  // no buffers
  const std::string path = WriteExported(source.get(), "no_buffers.safetensors");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();

  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  const std::vector<std::vector<float>> before = ModelValues(target.get());
  absl::Status s = LoadInitialWeights(*weights, target.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), absl::StrCat("init_from ", path,
                                      ": fc1.input_mean is missing from the file (the model's "
                                      "shape is [4])"));
  EXPECT_EQ(ModelValues(target.get()), before);
}

TEST(InitialWeightsTest, ExtraTensorIsRefusedButMomentumBuffersAreNot) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, false);
  CheckpointData weights = CaptureWithMomentum(source.get(), 5, "fingerprint");
  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, false);
  ASSERT_TRUE(CheckInitialWeights(weights, target.get()).ok()) << "momentum buffers ignored";

  weights.tensors.push_back({"fc3.weight", {2, 2}, {1, 2, 3, 4}});
  const std::vector<std::vector<float>> before = ModelValues(target.get());
  absl::Status s = LoadInitialWeights(weights, target.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  // Weights built in memory carry no path.
  EXPECT_EQ(s.message(),
            "init_from: the file has fc3.weight (shape [2, 2]), which the model does not have; "
            "was it written for other model.layers?");
  EXPECT_EQ(ModelValues(target.get()), before);
}

TEST(InitialWeightsTest, InconsistentInMemoryWeightsAreInvalid) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, false);
  CheckpointData weights = CaptureWithMomentum(source.get(), 5, "fingerprint");
  weights.tensors[1].data.pop_back();  // fc1.bias: shape [3], 2 values
  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, false);
  absl::Status s = CheckInitialWeights(weights, target.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "init_from: fc1.bias has shape [3] but 2 values");
}

TEST(InitialMomentumTest, TakesEveryMomentumBufferWholeWhateverTheFingerprint) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, true);
  const std::string path = WriteTrainedCheckpoint(source.get(), "with_momentum.ckpt");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->attributes.at(kInitFromFormatAttribute), kFormatCheckpoint);
  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  absl::StatusOr<std::vector<std::vector<float>>> momentum =
      InitialMomentum(*weights, target.get());
  ASSERT_TRUE(momentum.ok()) << momentum.status();
  ASSERT_EQ(momentum->size(), target->parameters().size());
  for (size_t i = 0; i < momentum->size(); ++i) {
    const std::string name = MomentumBufferName(target->parameters()[i].name);
    EXPECT_EQ((*momentum)[i], weights->FindTensor(name)->data) << name;
  }
}

TEST(InitialMomentumTest, RefusesSafetensorsMissingAndMisshapenMomentumNamingIt) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, false);
  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, false);

  const std::string exported = WriteExported(source.get(), "parameters_only.safetensors");
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(exported);
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::Status s = InitialMomentum(*weights, target.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            absl::StrCat("init_from ", exported,
                         ": is a safetensors file, which holds parameters only; "
                         "model.init_optimizer_state needs a ringleader checkpoint (e.g. "
                         "<checkpoint_dir>/<job>/final.ckpt) or drop init_optimizer_state"));

  // A checkpoint without momentum (a job with optimizer.momentum 0).
  const std::string bare = TempPath("no_momentum.ckpt");
  SgdOptimizer plain(source->parameters(), SgdOptions{});
  ASSERT_TRUE(WriteCheckpoint(bare, CaptureTrainingState(source.get(), plain, 3, 0, "f")).ok());
  weights = ReadInitialWeights(bare);
  ASSERT_TRUE(weights.ok()) << weights.status();
  s = InitialMomentum(*weights, target.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("init_from ", bare, ": holds no optimizer momentum")));
  EXPECT_THAT(std::string(s.message()), HasSubstr("drop model.init_optimizer_state"));

  CheckpointData misshapen = CaptureWithMomentum(source.get(), 5, "fingerprint");
  for (CheckpointTensor& t : misshapen.tensors) {
    if (t.name == "fc1.weight.momentum_buffer") t.shape = {4, 3};  // 12 values either way
  }
  s = InitialMomentum(misshapen, target.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "init_from: fc1.weight.momentum_buffer has shape [4, 3] (12 values) in the file but "
            "the model's fc1.weight is [3, 4]");

  CheckpointData foreign = CaptureWithMomentum(source.get(), 5, "fingerprint");
  foreign.tensors.push_back({"fc9.weight.momentum_buffer", {1}, {0.5f}});
  s = InitialMomentum(foreign, target.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("the file has fc9.weight.momentum_buffer, for a parameter the model "
                        "does not have"));
}

TEST(InitialWeightsTest, AShardedManifestLoadsAsItsConsolidatedCheckpoint) {
  std::unique_ptr<Mlp> source = MakeTestModel({4, 3, 2}, kSourceSeed, true);
  const CheckpointData trained = CaptureWithMomentum(source.get(), 5, "fingerprint");
  const std::string consolidated = TempPath("consolidated_for_shards.ckpt");
  ASSERT_TRUE(WriteCheckpoint(consolidated, trained).ok());
  const std::string dir = TempPath("init_from_sharded");
  std::filesystem::remove_all(dir);
  const std::string manifest = WriteShards(dir, 5, "fingerprint", ShardLikeZero(trained, {5, 17}));

  absl::StatusOr<CheckpointData> from_file = ReadInitialWeights(consolidated);
  absl::StatusOr<CheckpointData> from_manifest = ReadInitialWeights(manifest);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_manifest.ok()) << from_manifest.status();
  EXPECT_EQ(from_manifest->step, 5u);
  EXPECT_EQ(from_manifest->spec_fingerprint, "fingerprint");
  EXPECT_EQ(from_manifest->attributes.at(kInitFromPathAttribute), manifest);
  EXPECT_EQ(from_manifest->attributes.at(kInitFromFormatAttribute), kFormatCheckpoint);
  ASSERT_EQ(from_manifest->tensors.size(), from_file->tensors.size());
  for (size_t i = 0; i < from_file->tensors.size(); ++i) {
    EXPECT_EQ(from_manifest->tensors[i].name, from_file->tensors[i].name);
    EXPECT_EQ(from_manifest->tensors[i].shape, from_file->tensors[i].shape);
    EXPECT_EQ(from_manifest->tensors[i].data, from_file->tensors[i].data);
  }

  std::unique_ptr<Mlp> target = MakeTestModel({4, 3, 2}, kTargetSeed, true);
  absl::StatusOr<std::vector<std::vector<float>>> momentum =
      InitialMomentum(*from_manifest, target.get());
  absl::StatusOr<std::vector<std::vector<float>>> file_momentum =
      InitialMomentum(*from_file, target.get());
  ASSERT_TRUE(momentum.ok()) << momentum.status();
  ASSERT_TRUE(file_momentum.ok()) << file_momentum.status();
  EXPECT_EQ(*momentum, *file_momentum);
  ASSERT_TRUE(LoadInitialWeights(*from_manifest, target.get()).ok());
  EXPECT_EQ(ModelValues(target.get()), ModelValues(source.get()));

  // A shard gone: refused naming it.
  const std::string shard = absl::StrCat(dir, "/", ShardFileName("step-000000000005.ckpt", 2, 3));
  ASSERT_TRUE(std::filesystem::remove(shard));
  absl::StatusOr<CheckpointData> broken = ReadInitialWeights(manifest);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kNotFound) << broken.status();
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr(shard));
}

}  // namespace
}  // namespace ringleader
