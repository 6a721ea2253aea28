// End to end with real PyTorch (Debian's python3-torch, gloo, 2 ranks): the example script
// examples/pytorch/train.py as a command job, its steps reported by ringleader.torch.watch()
// and judged by the coordinator.
//   - the correct script: SUCCEEDED, no correctness alarm, and its per-step losses are the ones the same
//     script gives under torchrun (the hook changes no numerics);
//   - loss on ddp_model.module: stopped at step 1, the alarm naming every rank;
//   - a script raising on rank 1: FAILED with the traceback's last line in the reason;
//   - a rank's Python process killed: restarted (max_restarts) and resumed from its checkpoint;
//     without a checkpoint_dir, from the snapshots in the workers' memory
//     (ringleader.torch.snapshot, RINGLEADER_SNAPSHOT_DIR).
// Needs /usr/bin/python3 with torch, grpc and protobuf: without them these tests fail.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kJobTimeout = absl::Seconds(120);
constexpr char kPython[] = "/usr/bin/python3";

std::string Script() { return fs::absolute(RunfilePath("examples/pytorch/train.py")).string(); }

// A short run of the example: 40 steps of batch 32 over the first 4096 examples.
std::vector<std::string> ScriptArgs() {
  return {"--max-steps", "40", "--batch-size", "32", "--max-train-examples", "4096",
          "--drift-every", "10"};
}

v1::JobSpec ScriptJob(const std::string& name, const std::vector<std::string>& extra) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_world_size(2);
  spec.set_max_restarts(0);
  spec.add_command(kPython);
  spec.add_command(Script());
  for (const std::string& arg : ScriptArgs()) spec.add_command(arg);
  for (const std::string& arg : extra) spec.add_command(arg);
  (*spec.mutable_env())["PYTHONUNBUFFERED"] = "1";
  return spec;
}

// "step N loss <hex>" lines of rank 0 (unprefixed), as doubles by step.
std::map<uint64_t, double> LossesInOutput(const std::string& text) {
  std::map<uint64_t, double> losses;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    uint64_t step = 0;
    if (words.size() == 4 && words[0] == "step" && words[2] == "loss" &&
        absl::SimpleAtoi(words[1], &step)) {
      losses[step] = std::strtod(words[3].c_str(), nullptr);  // hex floats parse exactly
    }
  }
  return losses;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A port free on 127.0.0.1 now (torchrun's --master_port 0 does not pick one: it hangs).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return ntohs(address.sin_port);
}

// The same script under torchrun (no ringleader environment: watch() is a no-op); rank 0's
// losses by step.
std::map<uint64_t, double> TorchrunLosses(const std::string& dir) {
  const fs::path logs = fs::path(dir) / "torchrun-logs";
  std::vector<std::string> argv = {kPython, "-m", "torch.distributed.run",
                                   // torchrun on Python 3.11 needs non-zero --redirects and
                                   // --tee; rank outputs land under --log_dir.
                                   "--redirects", "1", "--tee", "2", "--log_dir", logs.string(),
                                   "--nproc_per_node", "2", "--master_port",
                                   absl::StrCat(FreePort()), Script()};
  for (const std::string& arg : ScriptArgs()) argv.push_back(arg);
  ChildOptions options;
  options.log_path = (fs::path(dir) / "torchrun.out").string();
  std::vector<std::string> env = {
      "PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1",
      absl::StrCat("PYTHONPATH=", fs::absolute(RunfilePath("python/pkg")).string())};
  options.env = env;
  absl::StatusOr<std::unique_ptr<ChildProcess>> run = ChildProcess::Start(argv, options);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  // A hung run fails the test instead of holding it until Bazel's timeout.
  const bool ended =
      WaitUntil([&] { return (*run)->HasExited(); }, absl::Seconds(120), "torchrun").ok();
  if (!ended) (*run)->Terminate(absl::Seconds(2));
  EXPECT_TRUE(ended) << ReadFile(options.log_path);
  const ExitInfo exit = (*run)->Wait();
  EXPECT_TRUE(exit.success()) << "torchrun " << exit.Describe() << ":\n"
                              << ReadFile(options.log_path);
  std::string rank0;
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(logs, error)) {
    if (entry.path().filename() == "stdout.log" &&
        entry.path().parent_path().filename() == "0") {
      rank0 = ReadFile(entry.path());
    }
  }
  return LossesInOutput(rank0);
}

// The verdict passed every correctness check: PASS, or WARN for stragglers only (two ranks
// sharing two busy cores with the rest of a test run are sometimes flagged; never failed).
void ExpectNoCorrectnessAlarm(const v1::JobStatus& job) {
  EXPECT_NE(job.verdict().result(), v1::Verdict::FAIL);
  EXPECT_NE(job.verdict().result(), v1::Verdict::RESULT_UNSPECIFIED);
  for (const v1::Alarm& alarm : job.alarms()) {
    EXPECT_EQ(alarm.kind(), v1::Alarm::STRAGGLER) << alarm.message();
  }
}

class PyTorchE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() { StartCluster(ClusterOptions()); }

  // Submits `spec` (run for 400 steps, one restart allowed), SIGKILLs rank 1's Python once it
  // is past step 20, and returns the job's end.
  static JobHistory KillRankOnesPythonPastStep20(v1::JobSpec spec) {
    for (int i = 0; i < spec.command_size(); ++i) {
      if (spec.command(i) == "--max-steps") spec.set_command(i + 1, "400");
    }
    spec.set_max_restarts(1);
    absl::StatusOr<std::string> job_id = cluster_->Submit(spec);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    if (!job_id.ok()) return JobHistory();
    const absl::Status past = WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*job_id);
          return job.ok() && job->ranks_size() == 2 && job->ranks(1).last_step().step() >= 20;
        },
        absl::Seconds(60), "rank 1 past step 20");
    EXPECT_TRUE(past.ok()) << past << cluster_->LogTails();
    absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*job_id);
    EXPECT_TRUE(job.ok());
    const int worker = job.ok() ? cluster_->WorkerIndex(job->ranks(1).worker_name()) : -1;
    EXPECT_GE(worker, 0);
    std::vector<ProcessRef> python;
    for (const ProcessRef& launcher : cluster_->WorkerChildren(worker)) {
      for (const ProcessRef& child : ChildrenOf(launcher.pid)) python.push_back(child);
    }
    EXPECT_EQ(python.size(), 1u) << "rank 1's Python process";
    if (python.size() == 1) EXPECT_EQ(kill(python[0].pid, SIGKILL), 0);
    return cluster_->WaitForEnd(*job_id, kJobTimeout);
  }
};

TEST_F(PyTorchE2eTest, CorrectScriptPassesWithTorchrunsLossesBitForBit) {
  const JobHistory history = RunJob(ScriptJob("pytorch-correct-e2e", {}), kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  ExpectNoCorrectnessAlarm(history.final);
  EXPECT_EQ(history.final.verdict().steps_judged(), 40u);

  absl::StatusOr<v1::GetJobMetricsResponse> metrics = cluster_->GetMetrics(history.final.job_id());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  std::map<uint64_t, double> reported;
  bool drift_measured = false;
  for (const v1::MetricsPoint& point : metrics->points()) {
    if (point.rank() == 0) reported[point.step()] = point.loss();
    if (point.has_drift()) {
      drift_measured = true;
      EXPECT_EQ(point.drift(), 0.0) << "step " << point.step();
    }
  }
  EXPECT_TRUE(drift_measured);
  const std::map<uint64_t, double> torchrun = TorchrunLosses(cluster_->dir());
  ASSERT_EQ(torchrun.size(), 40u);
  ASSERT_EQ(reported.size(), 40u);
  for (const auto& [step, loss] : torchrun) {
    EXPECT_EQ(reported[step], loss) << "step " << step << ": ringleader's run differs from torchrun's";
  }
}

TEST_F(PyTorchE2eTest, LossOnTheUnwrappedModelIsStoppedAtStepOneNamingEveryRank) {
  const JobHistory history =
      RunJob(ScriptJob("pytorch-unwrapped-e2e", {"--bug", "unwrapped"}), kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  ASSERT_FALSE(history.final.alarms().empty()) << LastReason(history.final);
  const v1::Alarm& alarm = history.final.alarms(0);
  EXPECT_EQ(alarm.kind(), v1::Alarm::NOT_SYNCHRONIZED);
  EXPECT_EQ(alarm.step(), 1u);
  EXPECT_THAT(alarm.ranks(), ElementsAre(0, 1));
  EXPECT_EQ(history.final.verdict().result(), v1::Verdict::FAIL);
  for (const v1::RankStatus& rank : history.final.ranks()) {
    EXPECT_LE(rank.last_step().step(), 1u) << "rank " << rank.rank() << " went on";
  }
}

TEST_F(PyTorchE2eTest, AnExceptionOnRankOneFailsTheJobQuotingTheTraceback) {
  const JobHistory history = RunJob(
      ScriptJob("pytorch-raises-e2e", {"--raise-on-rank", "1", "--raise-at-step", "3"}),
      kJobTimeout);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(history.final),
              AllOf(HasSubstr("rank 1"), HasSubstr("Traceback (most recent call last)"),
                    HasSubstr("ValueError: injected failure at step 3 on rank 1")));
}

TEST_F(PyTorchE2eTest, AKilledRankIsRestartedAndResumesFromItsCheckpoint) {
  const fs::path checkpoints = fs::path(cluster_->dir()) / "pytorch-checkpoints";
  v1::JobSpec spec = ScriptJob("pytorch-killed-e2e", {"--checkpoint-every", "10"});
  spec.set_checkpoint_dir(checkpoints.string());
  // Checkpoints are written at steps 10 and 20 before the kill.
  const JobHistory history = KillRankOnesPythonPastStep20(spec);
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  EXPECT_EQ(history.final.generation(), 2u);
  ASSERT_EQ(history.final.attempts_size(), 2);
  EXPECT_THAT(history.final.attempts(0).end_reason(),
              AllOf(HasSubstr("rank 1"), HasSubstr("killed by signal 9 (SIGKILL)")));
  EXPECT_GE(history.final.attempts(1).resumed_from_step(), 10u);
  ExpectNoCorrectnessAlarm(history.final);
}

// The same kill without a checkpoint directory: every rank saves its state to its worker's
// memory every 5 steps, and the restarted attempt (same workers, same ranks) resumes from it.
TEST_F(PyTorchE2eTest, AKilledRankIsRestartedAndResumesFromItsSnapshotInMemory) {
  const JobHistory history =
      KillRankOnesPythonPastStep20(ScriptJob("pytorch-snapshot-e2e", {"--snapshot-every", "5"}));
  ASSERT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  EXPECT_EQ(history.final.generation(), 2u);
  ASSERT_EQ(history.final.attempts_size(), 2);
  // Rank 1 had reported step 20, so both ranks had saved step 15 at least (step 20's snapshot
  // follows its report); the step they agree on is one they saved: a multiple of 5.
  EXPECT_GE(history.final.attempts(1).resumed_from_step(), 15u) << cluster_->LogTails();
  EXPECT_EQ(history.final.attempts(1).resumed_from_step() % 5, 0u);
  bool from_memory = false;
  for (const v1::JobEvent& event : history.final.events()) {
    from_memory |= event.message().find("resumed from ") != std::string::npos &&
                   event.message().find("/rank-") != std::string::npos;
  }
  EXPECT_TRUE(from_memory) << "no event names a snapshot file";
  ExpectNoCorrectnessAlarm(history.final);
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
