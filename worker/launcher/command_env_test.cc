#include "worker/launcher/command_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Assignment CommandAssignment() {
  v1::Assignment a;
  a.set_job_id("job-000007");
  a.set_generation(3);
  a.set_rank(2);
  a.set_world_size(4);
  a.set_local_rank(0);
  a.set_local_world_size(2);
  a.set_group_rank(1);
  a.set_group_world_size(2);
  a.mutable_spec()->add_command("/usr/bin/python3");
  a.mutable_spec()->set_max_restarts(5);
  a.mutable_spec()->set_drift_interval_steps(25);
  return a;
}

CommandEnvInputs Inputs() {
  CommandEnvInputs inputs;
  inputs.inherited = {"PATH=/usr/bin:/bin", "HOME=/home/u", "RANK=99", "RINGLEADER_JOB=old",
                      "PYTHONPATH=/site"};
  inputs.coordinator_address = "10.0.0.1:7070";
  inputs.master_addr = "10.0.0.2";
  inputs.master_port = 29511;
  inputs.python_path = "/opt/ringleader/python";
  inputs.checkpoint_dir = "/ckpt/job-000007";
  return inputs;
}

TEST(CommandEnvironmentTest, GivesTorchrunsVariablesAndRingleaders) {
  const std::vector<std::string> env = CommandEnvironment(CommandAssignment(), Inputs());
  for (const char* entry :
       {"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
        "GROUP_WORLD_SIZE=2", "ROLE_RANK=2", "ROLE_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.2",
        "MASTER_PORT=29511", "TORCHELASTIC_RESTART_COUNT=2", "TORCHELASTIC_MAX_RESTARTS=5",
        "TORCHELASTIC_RUN_ID=job-000007", "RINGLEADER_COORDINATOR=10.0.0.1:7070",
        "RINGLEADER_JOB=job-000007", "RINGLEADER_GENERATION=3", "RINGLEADER_RANK=2",
        "RINGLEADER_CHECKPOINT_DIR=/ckpt/job-000007", "RINGLEADER_DRIFT_INTERVAL_STEPS=25",
        "HOME=/home/u", "OMP_NUM_THREADS=1",
        "PYTHONPATH=/opt/ringleader/python:/site"}) {
    EXPECT_THAT(env, Contains(std::string(entry)));
  }
  // The worker's own RANK and RINGLEADER_JOB do not leak through.
  EXPECT_THAT(env, Not(Contains(std::string("RANK=99"))));
  EXPECT_THAT(env, Not(Contains(std::string("RINGLEADER_JOB=old"))));
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
}

TEST(CommandEnvironmentTest, JobEnvOverridesTheWorkersAndKeepsItsThreads) {
  v1::Assignment a = CommandAssignment();
  (*a.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "4";
  (*a.mutable_spec()->mutable_env())["HOME"] = "/job";
  (*a.mutable_spec()->mutable_env())["PYTHONPATH"] = "/job/lib";
  const std::vector<std::string> env = CommandEnvironment(a, Inputs());
  EXPECT_THAT(env, Contains(std::string("OMP_NUM_THREADS=4")));
  EXPECT_THAT(env, Contains(std::string("HOME=/job")));
  EXPECT_THAT(env, Contains(std::string("PYTHONPATH=/opt/ringleader/python:/job/lib")));
}

TEST(CommandEnvironmentTest, GpuWorkerSetsLocalRankToItsGpu) {
  CommandEnvInputs inputs = Inputs();
  inputs.gpu = 3;
  inputs.checkpoint_dir.clear();
  const std::vector<std::string> env = CommandEnvironment(CommandAssignment(), inputs);
  EXPECT_THAT(env, Contains(std::string("LOCAL_RANK=3")));
  for (const std::string& entry : env) {
    EXPECT_THAT(entry, Not(HasSubstr("RINGLEADER_CHECKPOINT_DIR")));
  }
}

TEST(ResolveProgramTest, FindsNamesInPathAndChecksPaths) {
  absl::StatusOr<std::string> sh = ResolveProgram("sh", "/nonexistent:/bin:/usr/bin", "/");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(access(sh->c_str(), X_OK), 0);
  absl::StatusOr<std::string> missing = ResolveProgram("no-such-program-xyz", "/bin", "/");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("command[0]: 'no-such-program-xyz' was not found in PATH (/bin)"));
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string script = dir + "/not-executable.sh";
  close(open(script.c_str(), O_CREAT | O_WRONLY, 0644));
  absl::StatusOr<std::string> plain = ResolveProgram("./not-executable.sh", "/bin", dir);
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(std::string(plain.status().message()),
              HasSubstr("command[0]: '" + dir + "/./not-executable.sh' is not an executable"));
  chmod(script.c_str(), 0755);
  EXPECT_TRUE(ResolveProgram("./not-executable.sh", "/bin", dir).ok());
}

TEST(ReserveFreePortTest, GivesABindablePortAndRefusesNames) {
  absl::StatusOr<int> port = ReserveFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
  EXPECT_EQ(ReserveFreePort("localhost").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringleader
