#include "client/spec_yaml.h"

#include <string>

#include "absl/status/status.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(yaml, "spec.yaml");
  EXPECT_FALSE(spec.ok()) << yaml;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(ParseJobSpecYamlTest, ReadsEveryKindOfField) {
  const std::string yaml = R"(
name: fmnist-ddp
world_size: 4
backend: nccl
model:
  kind: mlp
  layers: [784, 64, 10]
  frozen_parameters: [fc1.bias]
  with_buffers: true
  faults: {crash_rank: -1, crash_at_step: 7}
data: {dataset: synthetic, max_train_examples: 1000}
optimizer:
  learning_rate: 1e-2
  momentum: 0
  nesterov: false
sync: {bucket_cap_mb: 2.5, overlap: false, comm_dtype: bf16}
seed: 18446744073709551615
)";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(yaml, "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "fmnist-ddp");
  EXPECT_EQ(spec->world_size(), 4u);
  EXPECT_EQ(spec->backend(), "nccl");
  EXPECT_THAT(spec->model().layers(), ElementsAre(784, 64, 10));
  EXPECT_THAT(spec->model().frozen_parameters(), ElementsAre("fc1.bias"));
  EXPECT_TRUE(spec->model().with_buffers());
  EXPECT_EQ(spec->model().faults().crash_rank(), -1);
  EXPECT_EQ(spec->model().faults().crash_at_step(), 7u);
  EXPECT_EQ(spec->data().dataset(), "synthetic");
  EXPECT_EQ(spec->data().max_train_examples(), 1000u);
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate(), 0.01);
  EXPECT_TRUE(spec->optimizer().has_momentum());  // explicit 0 is kept as "set"
  EXPECT_EQ(spec->optimizer().momentum(), 0);
  EXPECT_FALSE(spec->optimizer().has_weight_decay());
  EXPECT_DOUBLE_EQ(spec->sync().bucket_cap_mb(), 2.5);
  EXPECT_TRUE(spec->sync().has_overlap());
  EXPECT_FALSE(spec->sync().overlap());
  EXPECT_EQ(spec->sync().comm_dtype(), "bf16");
  EXPECT_EQ(spec->seed(), 18446744073709551615ull);
}

TEST(ParseJobSpecYamlTest, EmptyDocumentAndNullValuesLeaveFieldsUnset) {
  absl::StatusOr<v1::JobSpec> empty = ParseJobSpecYaml("", "spec.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->ByteSizeLong(), 0u);
  absl::StatusOr<v1::JobSpec> nulls =
      ParseJobSpecYaml("seed:\noptimizer: {momentum: ~}\nmodel:\n", "spec.yaml");
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_FALSE(nulls->has_seed());
  EXPECT_FALSE(nulls->optimizer().has_momentum());
}

TEST(ParseJobSpecYamlTest, UnknownFieldSuggestsTheCloseOneWithLine) {
  EXPECT_EQ(ErrorOf("name: a\nworld_size: 2\n\n\n\n\noptimiser:\n  momentum: 0.9\n"),
            "spec.yaml:7: unknown field 'optimiser' (did you mean 'optimizer'?)");
  EXPECT_EQ(ErrorOf("model:\n  layer: [1, 2]\n"),
            "spec.yaml:2: unknown field 'model.layer' (did you mean 'model.layers'?)");
  EXPECT_THAT(ErrorOf("colour: red\n"),
              StartsWith("spec.yaml:1: unknown field 'colour' (a job spec has name, world_size"));
}

TEST(ParseJobSpecYamlTest, ReadsChecksAndRefusesUnknownCheckKeysWithTheirLine) {
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpecYaml("name: a\nchecks: {on_desync: warn, drift_tolerance: 0.001}\n", "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->checks().on_desync(), "warn");
  EXPECT_TRUE(spec->checks().has_drift_tolerance());
  EXPECT_DOUBLE_EQ(spec->checks().drift_tolerance(), 0.001);
  EXPECT_FALSE(spec->checks().has_grad_norm_rtol());
  EXPECT_FALSE(spec->checks().has_straggler_factor());

  absl::StatusOr<v1::JobSpec> block = ParseJobSpecYaml(
      "checks:\n  grad_norm_rtol: 1e-4\n  straggler_factor: 3\n  on_desync: fail\n", "spec.yaml");
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_DOUBLE_EQ(block->checks().grad_norm_rtol(), 1e-4);
  EXPECT_DOUBLE_EQ(block->checks().straggler_factor(), 3);
  EXPECT_EQ(block->checks().on_desync(), "fail");

  EXPECT_EQ(ErrorOf("name: a\nchecks:\n  on_desync: warn\n  drift_tolerence: 0.1\n"),
            "spec.yaml:4: unknown field 'checks.drift_tolerence' (did you mean "
            "'checks.drift_tolerance'?)");
  EXPECT_EQ(ErrorOf("checks: {on_desync: warn, colour: red}\n"),
            "spec.yaml:1: unknown field 'checks.colour' (checks has on_desync, grad_norm_rtol, "
            "drift_tolerance, straggler_factor, preflight, preflight_min_fraction)");
  EXPECT_EQ(ErrorOf("\nchecks:\n  drift_tolerance: tiny\n"),
            "spec.yaml:3: checks.drift_tolerance: expected a number, got 'tiny'");
}

TEST(ParseJobSpecYamlTest, WrongScalarTypes) {
  EXPECT_EQ(ErrorOf("name: x\n\nworld_size: two\n"),
            "spec.yaml:3: world_size: expected an unsigned integer, got 'two'");
  EXPECT_EQ(ErrorOf("optimizer:\n  learning_rate: fast\n"),
            "spec.yaml:2: optimizer.learning_rate: expected a number, got 'fast'");
  EXPECT_EQ(ErrorOf("sync:\n  overlap: maybe\n"),
            "spec.yaml:2: sync.overlap: expected true or false, got 'maybe'");
  EXPECT_EQ(ErrorOf("epochs: 2.5\n"),
            "spec.yaml:1: epochs: expected an unsigned integer, got '2.5'");
  EXPECT_EQ(ErrorOf("model: {faults: {crash_rank: x1}}\n"),
            "spec.yaml:1: model.faults.crash_rank: expected an integer, got 'x1'");
  EXPECT_EQ(ErrorOf("optimizer: {momentum: nan}\n"),
            "spec.yaml:1: optimizer.momentum: expected a number, got 'nan'");
}

TEST(ParseJobSpecYamlTest, NegativeAndTooLargeUnsignedAreErrorsNotWraparound) {
  EXPECT_EQ(ErrorOf("world_size: -2\n"), "spec.yaml:1: world_size: must not be negative, got -2");
  EXPECT_EQ(ErrorOf("model:\n  layers: [784, -1, 10]\n"),
            "spec.yaml:2: model.layers[1]: must not be negative, got -1");
  EXPECT_EQ(ErrorOf("epochs: 4294967296\n"),
            "spec.yaml:1: epochs: 4294967296 is too large (at most 4294967295)");
  EXPECT_EQ(ErrorOf("model: {faults: {crash_rank: 3000000000}}\n"),
            "spec.yaml:1: model.faults.crash_rank: 3000000000 is out of range");
}

TEST(ParseJobSpecYamlTest, WrongShapes) {
  EXPECT_EQ(ErrorOf("model:\n  layers: 784\n"),
            "spec.yaml:2: model.layers: expected a list such as [1, ...], got '784'");
  EXPECT_THAT(ErrorOf("optimizer: sgd\n"),
              StartsWith("spec.yaml:1: optimizer: expected a mapping with fields such as kind, "
                         "learning_rate"));
  EXPECT_EQ(ErrorOf("name: [a, b]\n"), "spec.yaml:1: name: expected a string, got a list");
  EXPECT_THAT(ErrorOf("- 1\n- 2\n"), HasSubstr("expected a mapping with fields such as name"));
}

TEST(ParseJobSpecYamlTest, DuplicateKey) {
  EXPECT_EQ(ErrorOf("epochs: 1\nname: a\nepochs: 2\n"),
            "spec.yaml:3: duplicate field 'epochs' (first given on line 1); give it once");
}

TEST(ParseJobSpecYamlTest, MalformedYamlReportsLineAndColumn) {
  const std::string error = ErrorOf("name: a\nmodel: {layers: [1, 2}\n");
  EXPECT_THAT(error, StartsWith("spec.yaml:2:"));
  EXPECT_THAT(error, HasSubstr("malformed YAML"));
  EXPECT_THAT(ErrorOf("a: 1\n---\nb: 2\n"), HasSubstr("expected one YAML document, got 2"));
}

TEST(ParseJobSpecYamlTest, RecordsFieldLines) {
  absl::StatusOr<JobSpecYaml> parsed = ParseJobSpecYamlWithLines(
      "name: a\nworld_size: 2\noptimizer:\n  learning_rate: -0.1\n", "spec.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->field_lines.at("world_size"), 2);
  EXPECT_EQ(parsed->field_lines.at("optimizer"), 3);
  EXPECT_EQ(parsed->field_lines.at("optimizer.learning_rate"), 4);
}

TEST(LocateSpecErrorTest, PrefixesTheLineOfTheMostSpecificGivenField) {
  absl::StatusOr<JobSpecYaml> parsed = ParseJobSpecYamlWithLines(
      "world_size: 2\noptimizer:\n  learning_rate: -0.1\nmodel:\n  layers: [10, 10]\n",
      "spec.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  v1::JobSpec spec = parsed->spec;
  ApplyJobSpecDefaults(&spec);
  absl::Status located = LocateSpecError(ValidateJobSpec(spec), *parsed, "spec.yaml");
  EXPECT_EQ(located.message(),
            "spec.yaml:5: model.layers[0]: must be 784 for fashion-mnist "
            "(28x28 pixels), got 10");
  spec.mutable_model()->set_layers(0, 784);
  located = LocateSpecError(ValidateJobSpec(spec), *parsed, "spec.yaml");
  EXPECT_EQ(located.message(), "spec.yaml:3: optimizer.learning_rate: must be > 0, got -0.1");
  // A field not in the file: unchanged.
  spec.mutable_optimizer()->set_learning_rate(0.1);
  spec.set_epochs(0);
  located = LocateSpecError(ValidateJobSpec(spec), *parsed, "spec.yaml");
  EXPECT_EQ(located.message(), "epochs: must be between 1 and 10000, got 0");
}

TEST(SetJobSpecFieldTest, SetsScalarsListsAndStrings) {
  v1::JobSpec spec;
  ASSERT_TRUE(SetJobSpecField("optimizer.momentum", "0", "--set", &spec).ok());
  EXPECT_TRUE(spec.optimizer().has_momentum());
  ASSERT_TRUE(SetJobSpecField("model.layers", "[784, 32, 10]", "--set", &spec).ok());
  EXPECT_THAT(spec.model().layers(), ElementsAre(784, 32, 10));
  ASSERT_TRUE(SetJobSpecField("name", "run #1: a", "--set", &spec).ok());
  EXPECT_EQ(spec.name(), "run #1: a");
  ASSERT_TRUE(SetJobSpecField("sync.overlap", "false", "--set", &spec).ok());
  EXPECT_TRUE(spec.sync().has_overlap());
  ASSERT_TRUE(SetJobSpecField("optimizer.momentum", "", "--set", &spec).ok());
  EXPECT_FALSE(spec.optimizer().has_momentum());
}

TEST(SetJobSpecFieldTest, Errors) {
  v1::JobSpec spec;
  EXPECT_EQ(SetJobSpecField("optimizer.momentun", "1", "--set", &spec).message(),
            "--set: unknown field 'optimizer.momentun' (did you mean 'optimizer.momentum'?)");
  EXPECT_EQ(SetJobSpecField("world_size", "-1", "--world_size", &spec).message(),
            "--world_size: world_size: must not be negative, got -1");
  EXPECT_EQ(SetJobSpecField("epochs.x", "1", "--set", &spec).message(),
            "--set: 'epochs' has no sub-fields");
  EXPECT_EQ(SetJobSpecField("batch_size", "big", "--batch_size", &spec).message(),
            "--batch_size: batch_size: expected an unsigned integer, got 'big'");
}

}  // namespace
}  // namespace ringleader

namespace ringleader {
namespace {

TEST(ParseJobSpecYamlTest, ReadsACommandJob) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
      "world_size: 2\n"
      "command: [/usr/bin/python3, train.py, --epochs, 1]\n"
      "env:\n"
      "  OMP_NUM_THREADS: 2\n"
      "  MODE: fast\n"
      "workdir: /srv/train\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->command(), ::testing::ElementsAre("/usr/bin/python3", "train.py", "--epochs", "1"));
  ASSERT_EQ(spec->env().size(), 2u);
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(spec->env().at("MODE"), "fast");
  EXPECT_EQ(spec->workdir(), "/srv/train");
}

TEST(ParseJobSpecYamlTest, EnvMustBeAMappingWithValuesAndNoRepeats) {
  absl::StatusOr<v1::JobSpec> list = ParseJobSpecYaml("env: [A, B]\n", "job.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(std::string(list.status().message()),
              ::testing::HasSubstr("job.yaml:1: env: expected a mapping such as {NAME: value}"));
  absl::StatusOr<v1::JobSpec> repeated = ParseJobSpecYaml("env:\n  A: 1\n  A: 2\n", "job.yaml");
  ASSERT_FALSE(repeated.ok());
  EXPECT_THAT(std::string(repeated.status().message()),
              ::testing::HasSubstr("duplicate field 'env.A' (first given on line 2)"));
  absl::StatusOr<v1::JobSpec> empty = ParseJobSpecYaml("env:\n  A:\n", "job.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), ::testing::HasSubstr("env.A: needs a value"));
}

}  // namespace
}  // namespace ringleader
