#include "common/job_spec.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/job_spec_test_util.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

using ::ringleader::v1::JobSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using job_spec_testing::ExpectInvalid;
using job_spec_testing::ValidSpec;

TEST(ApplyJobSpecDefaultsTest, FillsEveryDocumentedDefault) {
  JobSpec spec;
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.backend(), "gloo");
  EXPECT_EQ(spec.strategy(), "ddp");
  EXPECT_EQ(spec.model().kind(), "mlp");
  EXPECT_THAT(spec.model().layers(), ElementsAre(784, 256, 128, 10));
  EXPECT_EQ(spec.data().dataset(), "fashion-mnist");
  EXPECT_EQ(spec.data().path(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec.optimizer().kind(), "sgd");
  EXPECT_DOUBLE_EQ(spec.optimizer().learning_rate(), 0.05);
  EXPECT_DOUBLE_EQ(spec.optimizer().momentum(), 0.9);
  EXPECT_DOUBLE_EQ(spec.optimizer().weight_decay(), 5e-4);
  EXPECT_TRUE(spec.optimizer().has_dampening());
  EXPECT_DOUBLE_EQ(spec.optimizer().dampening(), 0);
  EXPECT_FALSE(spec.optimizer().nesterov());
  EXPECT_DOUBLE_EQ(spec.sync().bucket_cap_mb(), 25);
  EXPECT_DOUBLE_EQ(spec.sync().first_bucket_mb(), 1);
  EXPECT_TRUE(spec.sync().has_broadcast_buffers());
  EXPECT_TRUE(spec.sync().broadcast_buffers());
  EXPECT_TRUE(spec.sync().overlap());
  EXPECT_EQ(spec.sync().gradient_accumulation_steps(), 1u);
  EXPECT_EQ(spec.sync().comm_dtype(), "fp32");
  EXPECT_EQ(spec.epochs(), 3u);
  EXPECT_EQ(spec.batch_size(), 64u);
  EXPECT_EQ(spec.seed(), 1u);
  EXPECT_EQ(spec.drift_interval_steps(), 50u);
  EXPECT_EQ(spec.collective_timeout_ms(), 60000u);
  EXPECT_EQ(spec.max_restarts(), 3u);
  EXPECT_EQ(spec.keep_last_checkpoints(), 2u);
  EXPECT_TRUE(spec.data().shuffle());
  EXPECT_EQ(spec.checkpoint_interval_steps(), 0u);
  EXPECT_EQ(spec.world_size(), 0u);  // never defaulted: the submitter chooses
}

TEST(ApplyJobSpecDefaultsTest, KeepsExplicitZerosOfOptionalFields) {
  JobSpec spec;
  spec.mutable_optimizer()->set_momentum(0);
  spec.mutable_optimizer()->set_weight_decay(0);
  spec.mutable_sync()->set_broadcast_buffers(false);
  spec.mutable_sync()->set_overlap(false);
  spec.set_seed(0);
  spec.set_drift_interval_steps(0);
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.optimizer().momentum(), 0);
  EXPECT_EQ(spec.optimizer().weight_decay(), 0);
  EXPECT_FALSE(spec.sync().broadcast_buffers());
  EXPECT_FALSE(spec.sync().overlap());
  EXPECT_EQ(spec.seed(), 0u);
  EXPECT_EQ(spec.drift_interval_steps(), 0u);
}

TEST(ApplyJobSpecDefaultsTest, KeepsSetValuesAndIsIdempotent) {
  JobSpec spec;
  spec.set_backend("nccl");
  spec.mutable_model()->add_layers(784);
  spec.mutable_model()->add_layers(10);
  spec.mutable_data()->set_path("/data/fm");
  spec.set_epochs(7);
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.backend(), "nccl");
  EXPECT_THAT(spec.model().layers(), ElementsAre(784, 10));
  EXPECT_EQ(spec.data().path(), "/data/fm");
  EXPECT_EQ(spec.epochs(), 7u);
  JobSpec again = spec;
  ApplyJobSpecDefaults(&again);
  EXPECT_EQ(JobSpecFingerprint(again), JobSpecFingerprint(spec));
}

TEST(ApplyJobSpecDefaultsTest, SyntheticDatasetGetsNoPath) {
  JobSpec spec;
  spec.mutable_data()->set_dataset("synthetic");
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.data().path(), "");
}

TEST(ValidateJobSpecTest, DefaultsWithWorldSizeAreValid) {
  EXPECT_TRUE(ValidateJobSpec(ValidSpec()).ok());
}

TEST(ValidateJobSpecTest, WorldSize) {
  JobSpec spec = ValidSpec();
  spec.set_world_size(0);
  ExpectInvalid(spec, "world_size: must be between 1 and 1024, got 0");
  spec.set_world_size(1025);
  ExpectInvalid(spec, "world_size: must be between 1 and 1024, got 1025");
  JobSpecLimits limits;
  limits.max_world_size = 4;
  spec.set_world_size(5);
  EXPECT_THAT(std::string(ValidateJobSpec(spec, limits).message()),
              HasSubstr("between 1 and 4, got 5"));
}

TEST(ValidateJobSpecTest, NameLengthAndControlCharacters) {
  JobSpec spec = ValidSpec();
  spec.set_name(std::string(129, 'x'));
  ExpectInvalid(spec, "name: at most 128 characters");
  spec.set_name("bad\nname");
  ExpectInvalid(spec, "name: must not contain control characters");
}

TEST(ValidateJobSpecTest, BackendStrategyDataset) {
  JobSpec spec = ValidSpec();
  spec.set_backend("mpi");
  ExpectInvalid(spec, "backend: unknown backend 'mpi' (expected gloo or nccl)");
  spec = ValidSpec();
  spec.set_strategy("zero3");
  ExpectInvalid(spec, "strategy: unknown strategy 'zero3' (expected ddp, zero1, zero2 or fsdp)");
  spec = ValidSpec();
  spec.mutable_data()->set_dataset("cifar10");
  ExpectInvalid(spec, "data.dataset: unknown dataset 'cifar10'");
}

TEST(ValidateJobSpecTest, ModelKindAndLayers) {
  JobSpec spec = ValidSpec();
  spec.mutable_model()->set_kind("cnn");
  ExpectInvalid(spec, "model.kind: unknown model kind 'cnn' (expected mlp)");

  spec = ValidSpec();
  spec.mutable_model()->clear_layers();
  spec.mutable_model()->add_layers(784);
  ExpectInvalid(spec, "model.layers: need at least 2 sizes (input and output), got 1");

  spec = ValidSpec();
  spec.mutable_model()->set_layers(0, 100);
  ExpectInvalid(spec, "model.layers[0]: must be 784 for fashion-mnist");

  spec = ValidSpec();
  spec.mutable_model()->set_layers(3, 11);
  ExpectInvalid(spec, "model.layers[3]: must be 10 for fashion-mnist");

  spec = ValidSpec();
  spec.mutable_model()->set_layers(1, 0);
  ExpectInvalid(spec, "model.layers[1]: must be between 1 and 65536, got 0");

  spec = ValidSpec();
  spec.mutable_model()->clear_layers();
  spec.mutable_model()->add_layers(784);
  for (int i = 0; i < 16; ++i) spec.mutable_model()->add_layers(32);
  spec.mutable_model()->add_layers(10);  // 17 linear layers
  ExpectInvalid(spec, "model.layers: at most 16 linear layers");
}

TEST(ValidateJobSpecTest, SyntheticDatasetAcceptsAnyWidths) {
  JobSpec spec = ValidSpec();
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_model()->clear_layers();
  spec.mutable_model()->add_layers(16);
  spec.mutable_model()->add_layers(4);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpecTest, FrozenParameters) {
  JobSpec spec = ValidSpec();
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.mutable_model()->add_frozen_parameters("fc9.weight");
  ExpectInvalid(spec,
                "model.frozen_parameters[1]: unknown parameter 'fc9.weight' (model has "
                "fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias)");
  spec.mutable_model()->set_frozen_parameters(1, "fc1.weight");
  ExpectInvalid(spec, "model.frozen_parameters[1]: 'fc1.weight' is listed twice");

  spec = ValidSpec();
  for (const std::string& name : ModelParameterNames(spec.model())) {
    spec.mutable_model()->add_frozen_parameters(name);
  }
  ExpectInvalid(spec, "model.frozen_parameters: every parameter is frozen");
}

TEST(ValidateJobSpecTest, FaultRanksMustBeInRange) {
  JobSpec spec = ValidSpec();
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(2);
  ExpectInvalid(spec, "model.faults.bypass_sync_rank: must be a rank in [0, 2), got 2");
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());

  spec = ValidSpec();
  spec.mutable_model()->mutable_faults()->set_crash_at_step(5);
  spec.mutable_model()->mutable_faults()->set_crash_rank(-1);
  ExpectInvalid(spec, "model.faults.crash_rank: must be a rank in [0, 2), got -1");

  spec = ValidSpec();
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("fc2.bias");
  spec.mutable_model()->mutable_faults()->set_unused_parameter_rank(1);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.mutable_model()->mutable_faults()->add_unused_parameters_on_rank("head.bias");
  ExpectInvalid(spec, "model.faults.unused_parameters_on_rank[1]: unknown parameter 'head.bias'");
}

TEST(ValidateJobSpecTest, OptimizerRanges) {
  JobSpec spec = ValidSpec();
  spec.mutable_optimizer()->set_kind("adam");
  ExpectInvalid(spec, "optimizer.kind: unknown optimizer 'adam' (expected sgd)");

  spec = ValidSpec();
  spec.mutable_optimizer()->set_learning_rate(-0.1);
  ExpectInvalid(spec, "optimizer.learning_rate: must be > 0, got -0.1");
  spec.mutable_optimizer()->set_learning_rate(0);
  ExpectInvalid(spec, "optimizer.learning_rate: must be > 0, got 0");

  spec = ValidSpec();
  spec.mutable_optimizer()->set_momentum(1.0);
  ExpectInvalid(spec, "optimizer.momentum: must be in [0, 1), got 1");

  spec = ValidSpec();
  spec.mutable_optimizer()->set_weight_decay(-1e-4);
  ExpectInvalid(spec, "optimizer.weight_decay: must be >= 0, got -0.0001");

  spec = ValidSpec();
  spec.mutable_optimizer()->set_dampening(1.5);
  ExpectInvalid(spec, "optimizer.dampening: must be in [0, 1], got 1.5");
}

TEST(ValidateJobSpecTest, NesterovFollowsTorchRule) {
  JobSpec spec = ValidSpec();
  spec.mutable_optimizer()->set_nesterov(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());  // momentum 0.9, dampening 0
  spec.mutable_optimizer()->set_dampening(0.1);
  ExpectInvalid(spec, "optimizer.nesterov: needs momentum > 0 and dampening 0");
  spec.mutable_optimizer()->set_dampening(0);
  spec.mutable_optimizer()->set_momentum(0);
  ExpectInvalid(spec, "optimizer.nesterov: needs momentum > 0 and dampening 0");
}

TEST(ValidateJobSpecTest, SyncFields) {
  JobSpec spec = ValidSpec();
  spec.mutable_sync()->set_bucket_cap_mb(-1);
  ExpectInvalid(spec, "sync.bucket_cap_mb: must be > 0, got -1");
  spec = ValidSpec();
  spec.mutable_sync()->set_first_bucket_mb(-0.5);
  ExpectInvalid(spec, "sync.first_bucket_mb: must be > 0, got -0.5");
  spec = ValidSpec();
  spec.mutable_sync()->set_gradient_accumulation_steps(0);
  ExpectInvalid(spec, "sync.gradient_accumulation_steps: must be >= 1, got 0");
  spec = ValidSpec();
  spec.mutable_sync()->set_comm_dtype("fp16");
  ExpectInvalid(spec, "sync.comm_dtype: unknown dtype 'fp16' (expected fp32 or bf16)");
  spec.mutable_sync()->set_comm_dtype("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpecTest, EpochsAndBatchSize) {
  JobSpec spec = ValidSpec();
  spec.set_epochs(0);
  ExpectInvalid(spec, "epochs: must be between 1 and 10000, got 0");
  spec = ValidSpec();
  spec.set_batch_size(0);
  ExpectInvalid(spec, "batch_size: must be between 1 and 65536, got 0");
  spec.set_batch_size(65537);
  ExpectInvalid(spec, "batch_size: must be between 1 and 65536, got 65537");
}

TEST(ValidateJobSpecTest, ExplicitZerosAreErrorsNotDefaults) {
  // "epochs: 0" in a spec is a mistake to report, not a request for the default.
  JobSpec spec;
  spec.set_world_size(2);
  spec.set_epochs(0);
  ApplyJobSpecDefaults(&spec);
  ExpectInvalid(spec, "epochs: must be between 1 and 10000, got 0");
  spec = JobSpec();
  spec.set_world_size(2);
  spec.mutable_sync()->set_bucket_cap_mb(0);
  ApplyJobSpecDefaults(&spec);
  ExpectInvalid(spec, "sync.bucket_cap_mb: must be > 0, got 0");
  spec = JobSpec();
  spec.set_world_size(2);
  spec.set_collective_timeout_ms(0);
  ApplyJobSpecDefaults(&spec);
  ExpectInvalid(spec, "collective_timeout_ms: must be >= 100, got 0 (omit it for the default 60000)");
}

TEST(ValidateJobSpecTest, MixedPrecision) {
  JobSpec spec = ValidSpec();
  spec.set_mixed_precision("fp8");
  ExpectInvalid(spec, "mixed_precision: unknown precision 'fp8' (expected fp32 or bf16)");
  spec.set_mixed_precision("bf16");
  ExpectInvalid(spec, "mixed_precision: bf16 needs backend nccl");
  spec.set_backend("nccl");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpecTest, RestartsAndPeriodicCheckpoints) {
  JobSpec spec = ValidSpec();
  spec.set_max_restarts(101);
  ExpectInvalid(spec, "max_restarts: at most 100, got 101 (0 = never restart)");
  spec = ValidSpec();
  spec.set_max_restarts(0);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.set_keep_last_checkpoints(0);
  ExpectInvalid(spec, "keep_last_checkpoints: must be >= 1");
  spec = ValidSpec();
  spec.set_checkpoint_interval_steps(10);
  ExpectInvalid(spec, "checkpoint_interval_steps: 10 needs checkpoint_dir");
  spec.set_checkpoint_dir("/shared/checkpoints");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ModelParameterNamesTest, ListsWeightAndBiasPerLinearLayer) {
  v1::ModelSpec model;
  model.set_kind("mlp");
  model.add_layers(784);
  model.add_layers(32);
  model.add_layers(10);
  EXPECT_THAT(ModelParameterNames(model),
              ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  model.set_kind("cnn");
  EXPECT_TRUE(ModelParameterNames(model).empty());
}

TEST(JobSpecFingerprintTest, SixteenLowercaseHexDigitsAndStable) {
  const std::string fingerprint = JobSpecFingerprint(ValidSpec());
  ASSERT_EQ(fingerprint.size(), 16u);
  for (char c : fingerprint) {
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << fingerprint;
  }
  EXPECT_EQ(JobSpecFingerprint(ValidSpec()), fingerprint);
  // A copy built through a serialize/parse round trip hashes the same.
  JobSpec copy;
  ASSERT_TRUE(copy.ParseFromString(ValidSpec().SerializeAsString()));
  EXPECT_EQ(JobSpecFingerprint(copy), fingerprint);
}

TEST(JobSpecFingerprintTest, EmptySpecHashesToTheFnvOffsetBasis) {
  // FNV-1a of zero bytes is the offset basis: pins the algorithm, not just its stability.
  EXPECT_EQ(JobSpecFingerprint(JobSpec()), "cbf29ce484222325");
}

TEST(JobSpecFingerprintTest, KnownSingleFieldValue) {
  // world_size = 1 serializes to bytes {0x10, 0x01}; FNV-1a 64 computed by hand below.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : {0x10, 0x01}) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  char expected[17];
  snprintf(expected, sizeof(expected), "%016llx", static_cast<unsigned long long>(hash));
  JobSpec spec;
  spec.set_world_size(1);
  EXPECT_EQ(JobSpecFingerprint(spec), expected);
}

TEST(JobSpecFingerprintTest, ChangesWithAnyField) {
  const JobSpec base = ValidSpec();
  std::set<std::string> seen = {JobSpecFingerprint(base)};
  JobSpec changed = base;
  changed.set_world_size(3);
  seen.insert(JobSpecFingerprint(changed));
  changed = base;
  changed.mutable_optimizer()->set_learning_rate(0.051);
  seen.insert(JobSpecFingerprint(changed));
  changed = base;
  changed.mutable_model()->set_layers(1, 257);
  seen.insert(JobSpecFingerprint(changed));
  changed = base;
  changed.mutable_sync()->set_overlap(false);
  seen.insert(JobSpecFingerprint(changed));
  changed = base;
  changed.set_name("other");
  seen.insert(JobSpecFingerprint(changed));
  EXPECT_EQ(seen.size(), 6u);
}

}  // namespace
TEST(ValidateJobSpecTest, SizesOfTheSpecPathsAndBucketsAreBounded) {
  JobSpec spec = ValidSpec();
  spec.set_checkpoint_dir("/" + std::string(5000, 'd'));
  ExpectInvalid(spec, "checkpoint_dir: at most 4096 bytes, got 5001");
  spec = ValidSpec();
  spec.mutable_data()->set_path(std::string("/data\0/etc", 10));
  ExpectInvalid(spec, "data.path: must not contain NUL characters");
  spec = ValidSpec();
  spec.mutable_sync()->set_bucket_cap_mb(1e6);
  ExpectInvalid(spec, "sync.bucket_cap_mb: at most 4096 MB");
  spec = ValidSpec();
  for (int i = 0; i < 3000; ++i) spec.add_command(std::string(400, 'a'));
  ExpectInvalid(spec, "over the limit of 1048576: shorten command");
}

}  // namespace ringleader
