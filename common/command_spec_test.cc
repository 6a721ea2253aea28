#include "common/command_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

v1::JobSpec CommandSpec() {
  v1::JobSpec spec;
  spec.add_command("/usr/bin/python3");
  spec.add_command("train.py");
  return spec;
}

void ExpectInvalid(const v1::JobSpec& spec, const std::string& text) {
  const absl::Status status = ValidateCommandSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

TEST(ValidateCommandSpecTest, AcceptsACommandWithEnvAndWorkdir) {
  v1::JobSpec spec = CommandSpec();
  (*spec.mutable_env())["OMP_NUM_THREADS"] = "2";
  spec.set_workdir("/srv/train");
  EXPECT_TRUE(ValidateCommandSpec(spec).ok());
  EXPECT_TRUE(ValidateCommandSpec(v1::JobSpec()).ok());  // the built-in trainer
}

TEST(ValidateCommandSpecTest, RefusesEnvOrWorkdirWithoutACommand) {
  v1::JobSpec spec;
  (*spec.mutable_env())["A"] = "1";
  ExpectInvalid(spec, "env: only a command job takes env");
  spec.clear_env();
  spec.set_workdir("/tmp");
  ExpectInvalid(spec, "workdir: only a command job");
}

TEST(ValidateCommandSpecTest, NamesTheReservedVariable) {
  for (const std::string name : {"RANK", "WORLD_SIZE", "MASTER_PORT", "RINGLEADER_JOB",
                                 "TORCHELASTIC_ANYTHING", "RINGLEADER_FUTURE"}) {
    v1::JobSpec spec = CommandSpec();
    (*spec.mutable_env())[name] = "0";
    ExpectInvalid(spec, "env." + name + ": set by ringleader");
  }
}

TEST(ValidateCommandSpecTest, RefusesBadNamesEmptyProgramAndRelativeWorkdir) {
  v1::JobSpec spec = CommandSpec();
  (*spec.mutable_env())["1BAD"] = "x";
  ExpectInvalid(spec, "env.1BAD: not a variable name");
  spec = CommandSpec();
  (*spec.mutable_env())["A=B"] = "x";
  ExpectInvalid(spec, "env.A=B: not a variable name");
  spec = CommandSpec();
  spec.set_command(0, "");
  ExpectInvalid(spec, "command[0]: the program to run must not be empty");
  spec = CommandSpec();
  spec.set_command(1, std::string("a\0b", 3));
  ExpectInvalid(spec, "command[1]: must not contain a NUL");
  spec = CommandSpec();
  spec.set_workdir("relative/dir");
  ExpectInvalid(spec, "workdir: must be an absolute path, got 'relative/dir'");
}

TEST(ValidateCommandSpecTest, BoundsTheSize) {
  v1::JobSpec spec = CommandSpec();
  for (size_t i = 0; i < kMaxCommandArgs; ++i) spec.add_command("x");
  ExpectInvalid(spec, "command: at most 1024 arguments");
  spec = CommandSpec();
  spec.add_command(std::string(kMaxCommandBytes, 'x'));
  ExpectInvalid(spec, "command, env: at most");
}

TEST(IsReservedEnvNameTest, CoversTheListAndThePrefixes) {
  for (const std::string& name : ReservedCommandEnv()) EXPECT_TRUE(IsReservedEnvName(name));
  EXPECT_TRUE(IsReservedEnvName("RINGLEADER_TOKEN"));
  EXPECT_FALSE(IsReservedEnvName("OMP_NUM_THREADS"));
  EXPECT_FALSE(IsReservedEnvName("PYTHONPATH"));
}

}  // namespace
}  // namespace ringleader
