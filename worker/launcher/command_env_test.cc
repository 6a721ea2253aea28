#include "worker/launcher/command_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
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

// The environment as one value; a failure is the test's.
std::vector<std::string> EnvOf(const v1::Assignment& assignment, const CommandEnvInputs& inputs) {
  absl::StatusOr<std::vector<std::string>> env = CommandEnvironment(assignment, inputs);
  EXPECT_TRUE(env.ok()) << env.status();
  return env.ok() ? *env : std::vector<std::string>();
}

// The value of `name` in `env`, or nullopt when it is unset.
std::optional<std::string> Value(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

// CommandAssignment()'s rank at local rank `local_rank` of a host holding `local_gpus.size()`
// ranks of the job, on those GPUs (Assignment.local_gpus); an empty list (a coordinator older
// than the field) with `local_world_size` ranks.
v1::Assignment OnHost(uint32_t local_rank, const std::vector<int32_t>& local_gpus,
                      uint32_t local_world_size = 0) {
  v1::Assignment a = CommandAssignment();
  a.set_local_rank(local_rank);
  a.set_local_world_size(local_gpus.empty() ? local_world_size
                                            : static_cast<uint32_t>(local_gpus.size()));
  a.clear_local_gpus();
  for (int32_t gpu : local_gpus) a.add_local_gpus(gpu);
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
  inputs.snapshot_dir = "/dev/shm/ringleader-snapshots/w0/job-000007";
  return inputs;
}

TEST(CommandEnvironmentTest, GivesTorchrunsVariablesAndRingleaders) {
  const std::vector<std::string> env = EnvOf(CommandAssignment(), Inputs());
  for (const char* entry :
       {"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
        "GROUP_WORLD_SIZE=2", "ROLE_RANK=2", "ROLE_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.2",
        "MASTER_PORT=29511", "TORCHELASTIC_RESTART_COUNT=2", "TORCHELASTIC_MAX_RESTARTS=5",
        "TORCHELASTIC_RUN_ID=job-000007", "RINGLEADER_COORDINATOR=10.0.0.1:7070",
        "RINGLEADER_JOB=job-000007", "RINGLEADER_GENERATION=3", "RINGLEADER_RANK=2",
        "RINGLEADER_CHECKPOINT_DIR=/ckpt/job-000007",
        "RINGLEADER_SNAPSHOT_DIR=/dev/shm/ringleader-snapshots/w0/job-000007",
        "RINGLEADER_DRIFT_INTERVAL_STEPS=25",
        "HOME=/home/u", "OMP_NUM_THREADS=1",
        "PYTHONPATH=/opt/ringleader/python:/site"}) {
    EXPECT_THAT(env, Contains(std::string(entry)));
  }
  // The worker's own RANK and RINGLEADER_JOB do not leak through.
  EXPECT_THAT(env, Not(Contains(std::string("RANK=99"))));
  EXPECT_THAT(env, Not(Contains(std::string("RINGLEADER_JOB=old"))));
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
}

// A leader and its standbys: the worker's --coordinator list reaches the script as is (the
// Python reporter parses it).
TEST(CommandEnvironmentTest, ACoordinatorListPassesThroughUnchanged) {
  CommandEnvInputs inputs = Inputs();
  inputs.coordinator_address = "10.0.0.2:7070,10.0.0.1:7070";
  EXPECT_THAT(EnvOf(CommandAssignment(), inputs),
              Contains(std::string("RINGLEADER_COORDINATOR=10.0.0.2:7070,10.0.0.1:7070")));
}

// A worker without snapshots (--snapshot_dir=none) sets no RINGLEADER_SNAPSHOT_DIR, and one the
// worker itself inherited does not leak through (the script would write where no one cleans).
TEST(CommandEnvironmentTest, NoSnapshotDirLeavesTheVariableUnset) {
  CommandEnvInputs inputs = Inputs();
  inputs.snapshot_dir.clear();
  inputs.inherited.push_back("RINGLEADER_SNAPSHOT_DIR=/stale");
  EXPECT_EQ(Value(EnvOf(CommandAssignment(), inputs), "RINGLEADER_SNAPSHOT_DIR"), std::nullopt);
}

TEST(CommandEnvironmentTest, JobEnvOverridesTheWorkersAndKeepsItsThreads) {
  v1::Assignment a = CommandAssignment();
  (*a.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "4";
  (*a.mutable_spec()->mutable_env())["HOME"] = "/job";
  (*a.mutable_spec()->mutable_env())["PYTHONPATH"] = "/job/lib";
  const std::vector<std::string> env = EnvOf(a, Inputs());
  EXPECT_THAT(env, Contains(std::string("OMP_NUM_THREADS=4")));
  EXPECT_THAT(env, Contains(std::string("HOME=/job")));
  EXPECT_THAT(env, Contains(std::string("PYTHONPATH=/opt/ringleader/python:/job/lib")));
}

TEST(CommandEnvironmentTest, GpuWorkersSeeTheirHostsGpusInLocalRankOrder) {
  // This host holds two ranks of the job: GPU 3 (local rank 0) and GPU 5 (local rank 1).
  CommandEnvInputs inputs = Inputs();
  inputs.gpu = 5;
  const std::vector<std::string> on5 = EnvOf(OnHost(1, {3, 5}), inputs);
  EXPECT_EQ(Value(on5, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(on5, "LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(Value(on5, "CUDA_VISIBLE_DEVICES"), "3,5");  // device LOCAL_RANK = 1 is GPU 5
  inputs.gpu = 3;
  const std::vector<std::string> on3 = EnvOf(OnHost(0, {3, 5}), inputs);
  EXPECT_EQ(Value(on3, "LOCAL_RANK"), "0");
  EXPECT_EQ(Value(on3, "CUDA_VISIBLE_DEVICES"), "3,5");
  // The job's env cannot choose the GPUs of a GPU worker.
  v1::Assignment with_env = OnHost(1, {3, 5});
  (*with_env.mutable_spec()->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0";
  inputs.gpu = 5;
  EXPECT_EQ(Value(EnvOf(with_env, inputs), "CUDA_VISIBLE_DEVICES"), "3,5");
}

TEST(CommandEnvironmentTest, AWorkerStartedWithCudaVisibleDevicesMapsIndicesThroughIt) {
  // The host's workers run with CUDA_VISIBLE_DEVICES=4,6,GPU-abc,7: --gpu=2 is GPU-abc and
  // --gpu=0 is GPU 4.
  CommandEnvInputs inputs = Inputs();
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=4,6,GPU-abc,7");
  inputs.gpu = 0;
  const std::vector<std::string> env = EnvOf(OnHost(1, {2, 0}), inputs);
  EXPECT_EQ(Value(env, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(env, "CUDA_VISIBLE_DEVICES"), "GPU-abc,4");
  // A peer's index the worker's list does not have: the workers do not share the list.
  absl::StatusOr<std::vector<std::string>> outside = CommandEnvironment(OnHost(0, {0, 4}), inputs);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outside.status().message()),
              HasSubstr("GPU index 4 of a rank on this host is not in this worker's "
                        "CUDA_VISIBLE_DEVICES=4,6,GPU-abc,7"));
}

TEST(CommandEnvironmentTest, ASingleRankHostSeesItsOwnGpuAsDeviceZero) {
  CommandEnvInputs inputs = Inputs();
  inputs.gpu = 6;
  const std::vector<std::string> env = EnvOf(OnHost(0, {6}), inputs);
  EXPECT_EQ(Value(env, "LOCAL_RANK"), "0");
  EXPECT_EQ(Value(env, "LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(Value(env, "CUDA_VISIBLE_DEVICES"), "6");
  // An assignment without local_gpus (an older coordinator) says the same with one rank here.
  EXPECT_EQ(Value(EnvOf(OnHost(0, {}, 1), inputs), "CUDA_VISIBLE_DEVICES"), "6");
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=1,3,5,7");
  inputs.gpu = 2;
  EXPECT_EQ(Value(EnvOf(OnHost(0, {2}), inputs), "CUDA_VISIBLE_DEVICES"), "5");
}

TEST(CommandEnvironmentTest, CpuWorkersGetTheirLocalRankAndKeepTheInheritedDevices) {
  CommandEnvInputs inputs = Inputs();  // gpu -1
  const std::vector<std::string> plain = EnvOf(OnHost(1, {-1, -1}), inputs);
  EXPECT_EQ(Value(plain, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(plain, "CUDA_VISIBLE_DEVICES"), std::nullopt);
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=2,7");
  const std::vector<std::string> inherited = EnvOf(OnHost(1, {-1, -1}), inputs);
  EXPECT_EQ(Value(inherited, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(inherited, "CUDA_VISIBLE_DEVICES"), "2,7");
  // Nor is it checked: a CPU worker's assignment from an older coordinator lists nothing.
  inputs.checkpoint_dir.clear();
  const std::vector<std::string> old = EnvOf(OnHost(1, {}, 2), inputs);
  EXPECT_EQ(Value(old, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(old, "RINGLEADER_CHECKPOINT_DIR"), std::nullopt);
}

TEST(CommandEnvironmentTest, AHostMixingCpuAndGpuRanksShowsEachGpuWorkerOnlyItsOwn) {
  CommandEnvInputs inputs = Inputs();
  inputs.gpu = 2;
  const std::vector<std::string> env = EnvOf(OnHost(1, {-1, 2}), inputs);
  EXPECT_EQ(Value(env, "LOCAL_RANK"), "1");
  EXPECT_EQ(Value(env, "CUDA_VISIBLE_DEVICES"), "2");
}

TEST(CommandEnvironmentTest, AGpuListThatCannotHoldLocalRankIsRefused) {
  CommandEnvInputs inputs = Inputs();
  inputs.gpu = 5;
  auto error_of = [&inputs](const v1::Assignment& a) {
    absl::StatusOr<std::vector<std::string>> env = CommandEnvironment(a, inputs);
    EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
    return std::string(env.status().message());
  };
  // Two ranks here, no list (an older coordinator).
  EXPECT_THAT(error_of(OnHost(1, {}, 2)),
              HasSubstr("does not list the GPUs of the job's 2 ranks on this host"));
  // The list's entry at this local rank is another GPU.
  EXPECT_THAT(error_of(OnHost(0, {3, 5})),
              HasSubstr("lists GPUs [3, 5] for the job's ranks on this host, but this worker "
                        "drives GPU 5 as local rank 0"));
  // Two workers of the host on one GPU (e.g. each started with its own CUDA_VISIBLE_DEVICES
  // and --gpu=0).
  inputs.gpu = 0;
  EXPECT_THAT(error_of(OnHost(1, {0, 0})),
              HasSubstr("GPU 0 is listed twice among the job's ranks on this host"));
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=3, 3");
  EXPECT_THAT(error_of(OnHost(1, {1, 0})),
              HasSubstr("GPU 3 is listed twice among the job's ranks on this host (GPU indices "
                        "[1, 0] through CUDA_VISIBLE_DEVICES=3, 3)"));
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
