// End to end, restarts with real processes: a rank process killed with SIGKILL mid-training
// restarts the job as generation 2 from the snapshot in memory of the last step (no step lost)
// or, with snapshots off, from the last checkpoint, and the final weights equal an uninterrupted
// run's bit for bit; a corrupt newest checkpoint is named and the previous one used; a job that
// keeps failing ends FAILED once its restarts are used, listing every attempt.
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_series.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/cluster_test.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr absl::Duration kJobTimeout = absl::Seconds(120);
constexpr uint32_t kInterval = 8;  // checkpoint every 8 steps; 16 steps per epoch

std::string CheckpointRoot(const std::string& name) {
  return (fs::path(std::getenv("TEST_TMPDIR")) / "checkpoints" / name).string();
}

// Three epochs (48 steps) with a checkpoint every kInterval steps and restarts; no snapshots in
// memory, unless `snapshots` (then a restart resumes from them first).
v1::JobSpec RecoverableSpec(const std::string& name, bool snapshots = false) {
  v1::JobSpec spec = SmallSyntheticSpec(name);
  spec.set_epochs(3);
  spec.set_checkpoint_dir(CheckpointRoot(name));
  spec.set_checkpoint_interval_steps(kInterval);
  spec.set_keep_last_checkpoints(3);
  spec.set_max_restarts(2);
  spec.set_disable_snapshots(!snapshots);
  return spec;
}

CheckpointData ReadFinal(const v1::JobStatus& job) {
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(job.checkpoint_path());
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *data : CheckpointData();
}

// Every tensor (parameters and momentum buffers) equal bit for bit.
void ExpectBitIdentical(const CheckpointData& got, const CheckpointData& want) {
  EXPECT_EQ(got.step, want.step);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const CheckpointTensor& a = got.tensors[i];
    const CheckpointTensor& b = want.tensors[i];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.data.size(), b.data.size()) << a.name;
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0)
        << a.name << " differs from the uninterrupted run";
  }
}

bool HasEvent(const v1::JobStatus& job, const std::string& text) {
  for (const v1::JobEvent& event : job.events()) {
    if (event.message().find(text) != std::string::npos) return true;
  }
  return false;
}

class RecoveryE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    StartCluster(ClusterOptions());
  }

  // Polls until the job's first attempt reported the checkpoint of `step` (or the job ended).
  static v1::JobStatus WaitForCheckpoint(const std::string& job_id, uint64_t step) {
    v1::JobStatus seen;
    const absl::Status written = WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> status = cluster_->GetJob(job_id);
          if (status.ok()) seen = *status;
          return status.ok() &&
                 (status->last_checkpoint_step() >= step || status->restarts() >= 1 ||
                  IsTerminal(status->state()));
        },
        absl::Seconds(60), "the checkpoint");
    EXPECT_TRUE(written.ok()) << written;
    return seen;
  }

  // Submits `spec` slowed down (50 ms a step on rank 0; sleeping changes no weight), SIGKILLs
  // rank 1's process once it is a few steps past the first checkpoint, and returns the job's end.
  static JobHistory KillRankOneMidTraining(v1::JobSpec spec) {
    spec.mutable_model()->mutable_faults()->set_slow_rank(0);
    spec.mutable_model()->mutable_faults()->set_slow_ms(50);
    absl::StatusOr<std::string> id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return JobHistory();
    Cluster* cluster = cluster_;
    v1::JobStatus running;
    const absl::Status reached = WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> status = cluster->GetJob(*id);
          if (!status.ok()) return false;
          running = *status;
          return status->last_checkpoint_step() >= kInterval && status->ranks_size() == 2 &&
                 status->ranks(1).last_step().step() > kInterval + 2;
        },
        absl::Seconds(60), "rank 1 past the first checkpoint");
    EXPECT_TRUE(reached.ok()) << reached << cluster->LogTails();
    const int worker = cluster->WorkerIndex(running.ranks(1).worker_name());
    EXPECT_GE(worker, 0);
    const std::vector<ProcessRef> children = cluster->WorkerChildren(worker);
    EXPECT_THAT(children, SizeIs(1));
    if (children.size() == 1) {
      EXPECT_EQ(kill(children[0].pid, SIGKILL), 0) << strerror(errno);
    }
    return cluster->WaitForEnd(*id, kJobTimeout);
  }
};

TEST_F(RecoveryE2eTest, AKilledRankResumesFromTheSnapshotOfTheLastStepAndEndsBitIdentical) {
  const JobHistory reference = RunJob(RecoverableSpec("snap-uninterrupted", true), kJobTimeout);
  ASSERT_EQ(reference.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(reference.final);
  const JobHistory history = KillRankOneMidTraining(RecoverableSpec("snap-killed", true));
  const v1::JobStatus& final = history.final;
  ASSERT_EQ(final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(final);
  ASSERT_THAT(final.attempts(), SizeIs(2));
  const uint64_t resumed = final.attempts(1).resumed_from_step();
  // The last step every rank completed is the one resumed from (rank 0's snapshot of it, when
  // the killed rank's own was still being written): at most one step is run again.
  EXPECT_GE(resumed + 1, final.attempts(0).last_step());
  EXPECT_GT(resumed % kInterval, 0u) << "resumed from a checkpoint, not a snapshot";
  EXPECT_TRUE(HasEvent(final, absl::StrCat("step-", resumed, ".snap (step ", resumed, ")")))
      << final.DebugString();
  ExpectBitIdentical(ReadFinal(final), ReadFinal(reference.final));
  std::cout << "killed at step " << final.attempts(0).last_step() << ", resumed after step "
            << resumed << " from memory; restart took "
            << absl::FormatDuration(absl::Milliseconds(final.attempts(1).start_time_unix_ms() -
                                                       final.attempts(0).end_time_unix_ms()))
            << std::endl;
}

TEST_F(RecoveryE2eTest, AKilledRankRestartsFromTheLastCheckpointAndEndsBitIdentical) {
  const JobHistory reference = RunJob(RecoverableSpec("uninterrupted"), kJobTimeout);
  ASSERT_EQ(reference.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(reference.final);
  ASSERT_EQ(reference.final.generation(), 1u);

  // The same job; rank 1's process killed in the middle of training.
  const JobHistory history = KillRankOneMidTraining(RecoverableSpec("killed"));
  const v1::JobStatus& final = history.final;
  ASSERT_EQ(final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(final);
  EXPECT_EQ(final.generation(), 2u);
  EXPECT_EQ(final.restarts(), 1u);
  ASSERT_THAT(final.attempts(), SizeIs(2));
  EXPECT_THAT(final.attempts(0).end_reason(), HasSubstr("killed by signal 9 (SIGKILL)"));
  const uint64_t resumed = final.attempts(1).resumed_from_step();
  EXPECT_GE(resumed, kInterval);
  EXPECT_EQ(resumed % kInterval, 0u);
  // No more steps are lost than the checkpoint interval.
  EXPECT_LE(final.attempts(0).last_step() - resumed, kInterval + 1);
  EXPECT_TRUE(HasEvent(final, absl::StrCat(PeriodicCheckpointName(resumed), " (step ", resumed,
                                           ")")))
      << final.DebugString();
  ExpectBitIdentical(ReadFinal(final), ReadFinal(reference.final));
  std::cout << "killed at step " << final.attempts(0).last_step() << ", resumed after step "
            << resumed << "; restart took "
            << absl::FormatDuration(absl::Milliseconds(final.attempts(1).start_time_unix_ms() -
                                                       final.attempts(0).end_time_unix_ms()))
            << std::endl;
}

TEST_F(RecoveryE2eTest, ACorruptNewestCheckpointIsNamedAndThePreviousOneUsed) {
  v1::JobSpec spec = RecoverableSpec("corrupt");
  spec.mutable_model()->mutable_faults()->set_crash_rank(1);
  spec.mutable_model()->mutable_faults()->set_crash_at_step(2 * kInterval + 4);  // step 20
  // A first fault restarts at once: slow steps leave the test time to act between the
  // checkpoint of step 16 and the crash at step 20.
  spec.mutable_model()->mutable_faults()->set_slow_rank(1);
  spec.mutable_model()->mutable_faults()->set_slow_ms(500);
  absl::StatusOr<std::string> id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus written = WaitForCheckpoint(*id, 2 * kInterval);
  ASSERT_EQ(written.restarts(), 0u) << LastReason(written);
  // The checkpoint of step 16 is the newest: damage it before generation 2 reads it.
  const std::string newest = absl::StrCat(CheckpointRoot("corrupt"), "/", *id, "/",
                                          PeriodicCheckpointName(2 * kInterval));
  ASSERT_TRUE(fs::exists(newest)) << newest;
  {
    std::fstream file(newest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x7f');
  }

  const JobHistory history = cluster_->WaitForEnd(*id, kJobTimeout);
  const v1::JobStatus& final = history.final;
  ASSERT_EQ(final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(final);
  ASSERT_THAT(final.attempts(), SizeIs(2));
  EXPECT_EQ(final.attempts(1).resumed_from_step(), kInterval);
  EXPECT_TRUE(HasEvent(final, absl::StrCat("did not resume from ", newest)))
      << final.DebugString();
  EXPECT_TRUE(HasEvent(final, "checksum mismatch")) << final.DebugString();
}

TEST_F(RecoveryE2eTest, ExhaustedRestartsFailTheJobListingEveryAttempt) {
  v1::JobSpec spec = RecoverableSpec("exhausted");
  spec.set_max_restarts(1);
  spec.mutable_model()->mutable_faults()->set_crash_rank(0);
  spec.mutable_model()->mutable_faults()->set_crash_at_step(kInterval + 2);
  spec.mutable_model()->mutable_faults()->set_crash_every_attempt(true);
  const JobHistory history = RunJob(spec, kJobTimeout);
  const v1::JobStatus& final = history.final;
  ASSERT_EQ(final.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(LastReason(final), HasSubstr("no restart left: 1 of 1 used"));
  ASSERT_THAT(final.attempts(), SizeIs(2));
  for (const v1::AttemptSummary& attempt : final.attempts()) {
    EXPECT_THAT(attempt.end_reason(), AnyOf(HasSubstr("killed by signal 6 (SIGABRT)"),
                                            HasSubstr("signal 6")));
  }
  // The second attempt resumed from the checkpoint of step 8 and crashed again at step 10.
  EXPECT_EQ(final.attempts(1).resumed_from_step(), kInterval);

  const CliResult status = cluster_->RunCli({"status", final.job_id()}, absl::Seconds(30));
  EXPECT_THAT(status.output, HasSubstr("attempts"));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
