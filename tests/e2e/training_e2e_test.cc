// End to end, successful training: the real coordinator, two real worker daemons and their rank
// processes, and the CLI. A short Fashion-MNIST job must succeed with falling loss, equal synced
// gradient norms on both ranks, zero drift, a loadable checkpoint and a reported test accuracy;
// a job whose rank 1 bypasses gradient sync must show drift naming a tensor.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
constexpr absl::Duration kJobTimeout = absl::Seconds(90);

class TrainingE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() { StartCluster(ClusterOptions()); }
  static void TearDownTestSuite() {
    if (cluster_ == nullptr) return;
    // A clean shutdown: SIGTERM makes each daemon stop and exit 0.
    for (const ExitInfo& exit : cluster_->StopWorkers()) {
      EXPECT_TRUE(exit.success()) << "worker daemon " << exit.Describe();
    }
    ClusterTest::TearDownTestSuite();
  }
};

TEST_F(TrainingE2eTest, FashionMnistJobSubmittedWithTheCliSucceedsInLockstep) {
  if (!fs::exists(kFashionMnistDir)) GTEST_SKIP() << "no Fashion-MNIST at " << kFashionMnistDir;
  const std::string checkpoints = (fs::path(cluster_->dir()) / "checkpoints").string();
  const CliResult submitted = cluster_->RunCli(
      {"submit", "--name", "fashion-e2e", "--epochs", "2", "--set",
       "data.max_train_examples=6000", "--set", "drift_interval_steps=10", "--set",
       "checkpoint_dir=" + checkpoints},
      absl::Seconds(30));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  std::string job_id;
  for (absl::string_view line : absl::StrSplit(submitted.output, '\n')) {
    if (absl::ConsumePrefix(&line, "submitted job ")) job_id = std::string(line);
  }
  ASSERT_FALSE(job_id.empty()) << submitted.output;

  const JobHistory history = cluster_->WaitForEnd(job_id, kJobTimeout);
  ASSERT_TRUE(history.ended) << "job " << job_id << " did not end within "
                             << absl::FormatDuration(kJobTimeout);
  const v1::JobStatus& job = history.final;
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(job);
  std::cout << "fashion-mnist job took " << absl::FormatDuration(history.elapsed) << std::endl;

  // Loss falls: epoch by epoch, and over the steps observed while it ran.
  ASSERT_EQ(job.epochs_size(), 2);
  EXPECT_LT(job.epochs(1).train_loss(), job.epochs(0).train_loss());
  const auto& seen = history.observed_steps.at(0);
  ASSERT_FALSE(seen.empty());
  if (seen.size() >= 2) {
    EXPECT_LT(seen.back().loss(), seen.front().loss());
  }
  // A reported, better-than-chance test accuracy (10 classes).
  EXPECT_GT(job.epochs(1).test_accuracy(), 0.6);
  EXPECT_GT(job.epochs(1).test_loss(), 0.0);

  // Both ranks ended at the same step with bit-identical synced gradient norms and zero drift.
  ASSERT_EQ(job.ranks_size(), 2);
  const v1::StepReport& r0 = job.ranks(0).last_step();
  const v1::StepReport& r1 = job.ranks(1).last_step();
  // 6000 examples / 2 ranks / 64 per batch = 47 steps per epoch.
  EXPECT_EQ(r0.step(), 94u);
  EXPECT_EQ(r1.step(), r0.step());
  EXPECT_GT(r0.synced_grad_norm(), 0.0);
  EXPECT_EQ(r0.synced_grad_norm(), r1.synced_grad_norm());
  EXPECT_NE(r0.local_grad_norm(), r1.local_grad_norm());
  EXPECT_EQ(r0.collective_digest(), r1.collective_digest());
  ASSERT_TRUE(r0.has_drift());
  ASSERT_TRUE(r1.has_drift());
  EXPECT_EQ(r0.drift(), 0.0);
  EXPECT_EQ(r1.drift(), 0.0);

  // Rank 0's checkpoint exists and loads.
  EXPECT_EQ(job.checkpoint_path(), checkpoints + "/" + job_id + "/final.ckpt");
  absl::StatusOr<CheckpointData> checkpoint = ReadCheckpoint(job.checkpoint_path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->step, 94u);
  EXPECT_EQ(checkpoint->spec_fingerprint, job.spec_fingerprint());
  const CheckpointTensor* weight = checkpoint->FindTensor("fc1.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->data.size(), 784u * 256u);

  const CliResult status = cluster_->RunCli({"status", job_id}, absl::Seconds(30));
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("SUCCEEDED"));
  std::cout << "$ ringleader status " << job_id << "\n" << status.output << std::endl;

  // Both ranks run on this one host: they exchanged through shared memory, not loopback TCP
  // (each rank's first line names its backend).
  const CliResult logs = cluster_->RunCli({"logs", job_id}, absl::Seconds(30));
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  size_t shm_ranks = 0;
  for (size_t at = logs.output.find("backend shm on cpu"); at != std::string::npos;
       at = logs.output.find("backend shm on cpu", at + 1)) {
    ++shm_ranks;
  }
  EXPECT_EQ(shm_ranks, 2u) << logs.output;
  EXPECT_THAT(logs.output, Not(HasSubstr("backend gloo"))) << logs.output;
}

TEST_F(TrainingE2eTest, RankThatBypassesSyncShowsUpAsDriftNamingATensor) {
  v1::JobSpec spec = SmallSyntheticSpec("bypass-e2e");
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  // Under "warn" the job runs to its end (under the default "fail" the coordinator stops it at
  // step 1: checks_e2e_test).
  spec.mutable_checks()->set_on_desync("warn");
  absl::StatusOr<std::string> job_id = cluster_->Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const JobHistory history = cluster_->WaitForEnd(*job_id, kJobTimeout);
  ASSERT_TRUE(history.ended);
  const v1::JobStatus& job = history.final;
  ASSERT_EQ(job.ranks_size(), 2);
  for (const v1::RankStatus& rank : job.ranks()) {
    const v1::StepReport& last = rank.last_step();
    ASSERT_TRUE(last.has_drift()) << "rank " << rank.rank();
    EXPECT_GT(last.drift(), 0.0) << "rank " << rank.rank();
    EXPECT_THAT(last.drift_parameter(), ::testing::MatchesRegex("fc[0-9]+\\.(weight|bias)"));
  }
  // The bypassing rank stepped with its own gradients: the synced norms disagree.
  EXPECT_NE(job.ranks(0).last_step().synced_grad_norm(),
            job.ranks(1).last_step().synced_grad_norm());
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
