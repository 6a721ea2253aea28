#include "client/commands.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/mock_job_client.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Not;
using ::testing::Return;
using ::testing::StrictMock;

class CommandsTest : public ::testing::Test {
 protected:
  CommandsTest() {
    env_.out = &out_;
    env_.err = &err_;
    env_.clock = &clock_;
    env_.sleep = [this](absl::Duration d) { sleeps_.push_back(d); };
    env_.read_file = [this](const std::string& path) -> absl::StatusOr<std::string> {
      auto it = files_.find(path);
      if (it == files_.end()) return absl::NotFoundError("no such file");
      return it->second;
    };
    env_.coordinator_address = "10.0.0.1:7070";
  }

  StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  std::vector<absl::Duration> sleeps_;
  std::map<std::string, std::string> files_;
  CommandEnvironment env_;
};

v1::SubmitJobResponse Submitted(const std::string& id, const std::string& fingerprint) {
  v1::SubmitJobResponse response;
  response.set_job_id(id);
  response.set_spec_fingerprint(fingerprint);
  return response;
}

// ----- submit ------------------------------------------------------------------------------

TEST_F(CommandsTest, SubmitSendsFileWithOverridesAndPrintsIdAndFingerprint) {
  files_["spec.yaml"] = "name: demo\nepochs: 5\noptimizer:\n  momentum: 0.5\n";
  SubmitOptions options;
  options.spec_path = "spec.yaml";
  options.overrides = {{"--lr", "optimizer.learning_rate", "0.1"},
                       {"--set", "sync.bucket_cap_mb", "4"}};
  absl::StatusOr<v1::JobSpec> expected = BuildSubmitSpec(options, env_);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(expected->world_size(), 2u);  // CLI default
  EXPECT_EQ(expected->epochs(), 5u);
  EXPECT_DOUBLE_EQ(expected->optimizer().momentum(), 0.5);
  EXPECT_DOUBLE_EQ(expected->optimizer().learning_rate(), 0.1);
  EXPECT_DOUBLE_EQ(expected->sync().bucket_cap_mb(), 4);
  EXPECT_EQ(expected->backend(), "gloo");  // defaults applied
  const std::string fingerprint = JobSpecFingerprint(*expected);

  v1::JobSpec sent;
  EXPECT_CALL(client_, Submit(_)).WillOnce([&](const v1::JobSpec& spec) {
    sent = spec;
    return Submitted("j-7", fingerprint);
  });
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitOk);
  EXPECT_EQ(JobSpecFingerprint(sent), fingerprint);
  EXPECT_EQ(out_.str(), "submitted job j-7\nfingerprint " + fingerprint + "\n");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandsTest, SubmitKeepsWorldSizeFromFileOrFlag) {
  files_["one.yaml"] = "world_size: 1\n";
  SubmitOptions options;
  options.spec_path = "one.yaml";
  EXPECT_EQ(BuildSubmitSpec(options, env_)->world_size(), 1u);
  options.overrides = {{"--world_size", "world_size", "8"}};
  EXPECT_EQ(BuildSubmitSpec(options, env_)->world_size(), 8u);
}

TEST_F(CommandsTest, SubmitRejectsExplicitZeroWorldSizeBeforeSending) {
  files_["spec.yaml"] = "name: a\nworld_size: 0\n";
  SubmitOptions options;
  options.spec_path = "spec.yaml";
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitUsage);  // StrictMock: no Submit call
  EXPECT_EQ(err_.str(),
            "error: invalid job spec: spec.yaml:2: world_size: must be between 1 and 1024, "
            "got 0\n");
}

TEST_F(CommandsTest, SubmitValidationErrorFromFlag) {
  SubmitOptions options;
  options.overrides = {{"--lr", "optimizer.learning_rate", "-0.1"}};
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("optimizer.learning_rate: must be > 0, got -0.1"));
}

TEST_F(CommandsTest, SubmitTypeErrorNamesTheFlag) {
  SubmitOptions options;
  options.overrides = {{"--epochs", "epochs", "many"}};
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitUsage);
  EXPECT_EQ(err_.str(),
            "error: invalid job spec: --epochs: epochs: expected an unsigned "
            "integer, got 'many'\n");
}

TEST_F(CommandsTest, SubmitYamlErrorAndMissingFile) {
  files_["bad.yaml"] = "world_size: 2\noptimiser: {}\n";
  SubmitOptions options;
  options.spec_path = "bad.yaml";
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("bad.yaml:2: unknown field 'optimiser' (did you mean 'optimizer'?)"));
  options.spec_path = "missing.yaml";
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("cannot read spec file missing.yaml: no such file"));
}

TEST_F(CommandsTest, SubmitServerRejectionIsUsageErrorOtherFailuresExitOne) {
  EXPECT_CALL(client_, Submit(_))
      .WillOnce(Return(absl::InvalidArgumentError("model.layers[1]: too wide for this cluster")))
      .WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("error: the coordinator rejected the job spec: "
                                    "model.layers[1]: too wide for this cluster"));
  err_.str("");
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("error: submit failed: connection refused [UNAVAILABLE]"));
  EXPECT_THAT(err_.str(), HasSubstr("is the coordinator running at 10.0.0.1:7070?"));
}

TEST_F(CommandsTest, SubmitNotesAFingerprintMismatch) {
  EXPECT_CALL(client_, Submit(_)).WillOnce(Return(Submitted("j-1", "ffffffffffffffff")));
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("note: the coordinator's spec fingerprint differs"));
}

// ----- status / list / workers / cancel -----------------------------------------------------

v1::JobStatus RunningJob() {
  v1::JobStatus job;
  job.set_job_id("j-3");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_generation(2);
  job.set_spec_fingerprint("0123456789abcdef");
  job.mutable_spec()->set_name("fmnist");
  job.mutable_spec()->set_world_size(2);
  job.mutable_spec()->set_backend("gloo");
  v1::StateTransition* transition = job.add_transitions();
  transition->set_state(v1::JOB_STATE_QUEUED);
  transition->set_time_unix_ms(1'700'000'000'000);
  transition->set_reason("submitted");
  for (uint32_t r = 0; r < 2; ++r) {
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id("w-" + std::to_string(r));
    rank->set_worker_name("node" + std::to_string(r));
    rank->set_host("host" + std::to_string(r));
    rank->set_joined(true);
    rank->set_heartbeat_age_ms(1500);
    v1::StepReport* step = rank->mutable_last_step();
    step->set_step(120 + r);
    step->set_epoch(1);
    step->set_loss(0.4321);
    step->set_local_grad_norm(2.5 + r);
    step->set_synced_grad_norm(1.75);
    step->set_has_drift(true);
    step->set_drift(0);
    step->set_step_ms(12.3);
    step->set_comm_ms(4.5);
    step->set_overlapped_comm_ms(3.25);
  }
  v1::EpochReport* epoch = job.add_epochs();
  epoch->set_epoch(1);
  epoch->set_test_accuracy(0.8123);
  epoch->set_test_loss(0.51);
  epoch->set_train_loss(0.47);
  return job;
}

TEST_F(CommandsTest, StatusPrintsStateTransitionsRanksAndEpochs) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("job          j-3  fmnist\n"));
  EXPECT_THAT(text, HasSubstr("state        RUNNING\n"));
  EXPECT_THAT(text, HasSubstr("generation   2\n"));
  EXPECT_THAT(text, HasSubstr("fingerprint  0123456789abcdef\n"));
  EXPECT_THAT(text, HasSubstr("2023-11-14 22:13:20.000 UTC  QUEUED  submitted"));
  EXPECT_THAT(text, HasSubstr("RANK  WORKER  HOST   STATE    STEP  EPOCH  LOSS    LOCAL_GRAD  "
                              "SYNCED_GRAD  DRIFT  STEP_MS  COMM_MS  HIDDEN_MS  HEARTBEAT"));
  EXPECT_THAT(text, HasSubstr("0     node0   host0  running  120   1      0.4321  2.5         "
                              "1.75         0      12.3     4.5      3.25       1.5s"));
  EXPECT_THAT(text, HasSubstr("1     node1   host1  running  121"));
  EXPECT_THAT(text, HasSubstr("EPOCH  TEST_ACCURACY  TEST_LOSS  TRAIN_LOSS"));
  EXPECT_THAT(text, HasSubstr("1      0.8123         0.51       0.47"));
}

TEST_F(CommandsTest, StatusShowsRankErrorsAndUnknownJobExitsOne) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  response.mutable_job()->mutable_ranks(1)->set_finished(true);
  response.mutable_job()->mutable_ranks(1)->set_error("collective timeout at step 121");
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_CALL(client_, Get("j-9")).WillOnce(Return(absl::NotFoundError("no job j-9")));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("rank 1: collective timeout at step 121"));
  EXPECT_THAT(out_.str(), HasSubstr("failed"));
  EXPECT_EQ(RunStatus("j-9", client_, env_), kExitFailure);
  EXPECT_EQ(err_.str(), "error: cannot get job j-9: no job j-9 [NOT_FOUND]\n");
}

TEST_F(CommandsTest, ListAndWorkersTables) {
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = RunningJob();
  v1::ListWorkersResponse workers;
  v1::WorkerStatus* worker = workers.add_workers();
  worker->set_worker_id("w-0");
  worker->set_name("node0");
  worker->set_host("host0");
  worker->set_state(v1::WORKER_STATE_BUSY);
  worker->set_job_id("j-3");
  worker->set_rank(0);
  worker->set_heartbeat_age_ms(300);
  v1::Device* device = worker->add_devices();
  device->set_kind("cpu");
  EXPECT_CALL(client_, List()).WillOnce(Return(jobs));
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(workers));
  EXPECT_EQ(RunList(client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("JOB  NAME    STATE    WORLD  BACKEND  GEN  STEP  ACCURACY"));
  EXPECT_THAT(out_.str(), HasSubstr("j-3  fmnist  RUNNING  2      gloo     2    120   0.8123"));
  out_.str("");
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("WORKER  NAME   HOST   STATE  DEVICES  JOB  RANK  HEARTBEAT"));
  EXPECT_THAT(out_.str(), HasSubstr("w-0     node0  host0  BUSY   cpu:0    j-3  0     300ms"));
}

TEST_F(CommandsTest, CancelReportsSuccessAndRefusal) {
  EXPECT_CALL(client_, Cancel("j-3", "enough"))
      .WillOnce(Return(v1::CancelJobResponse()))
      .WillOnce(Return(absl::FailedPreconditionError("job j-3 already SUCCEEDED")));
  EXPECT_EQ(RunCancel("j-3", "enough", client_, env_), kExitOk);
  EXPECT_EQ(out_.str(), "cancelled job j-3\n");
  EXPECT_EQ(RunCancel("j-3", "enough", client_, env_), kExitFailure);
  EXPECT_EQ(err_.str(),
            "error: cannot cancel job j-3: job j-3 already SUCCEEDED [FAILED_PRECONDITION]\n");
}

// ----- watch --------------------------------------------------------------------------------

v1::WatchJobResponse Watched(v1::JobStatus job, uint64_t version) {
  job.set_version(version);
  v1::WatchJobResponse response;
  *response.mutable_job() = std::move(job);
  return response;
}

v1::JobStatus WithSteps(v1::JobStatus job, uint64_t step, double norm0, double norm1) {
  job.mutable_ranks(0)->mutable_last_step()->set_step(step);
  job.mutable_ranks(1)->mutable_last_step()->set_step(step);
  job.mutable_ranks(0)->mutable_last_step()->set_synced_grad_norm(norm0);
  job.mutable_ranks(1)->mutable_last_step()->set_synced_grad_norm(norm1);
  return job;
}

v1::JobStatus Finished(v1::JobStatus job, v1::JobState state) {
  job.set_state(state);
  v1::StateTransition* transition = job.add_transitions();
  transition->set_state(state);
  transition->set_time_unix_ms(1'700'000'100'000);
  transition->set_reason("all ranks finished");
  v1::EpochReport* epoch = job.add_epochs();
  epoch->set_epoch(2);
  epoch->set_test_accuracy(0.8456);
  return job;
}

TEST_F(CommandsTest, WatchFollowsVersionsUntilSucceededAndPasses) {
  const v1::JobStatus running = RunningJob();
  {
    InSequence order;
    EXPECT_CALL(client_, Watch("j-3", 0, absl::Seconds(5))).WillOnce(Return(Watched(running, 4)));
    // A long poll that ran out: same version, nothing printed.
    EXPECT_CALL(client_, Watch("j-3", 4, _)).WillOnce(Return(Watched(running, 4)));
    EXPECT_CALL(client_, Watch("j-3", 4, _))
        .WillOnce(Return(Watched(WithSteps(running, 200, 1.5, 1.5), 5)));
    EXPECT_CALL(client_, Watch("j-3", 5, _))
        .WillOnce(Return(
            Watched(Finished(WithSteps(running, 300, 1.25, 1.25), v1::JOB_STATE_SUCCEEDED), 6)));
  }
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("2023-11-14 22:13:20.000 UTC  QUEUED: submitted\n"));
  EXPECT_THAT(text, HasSubstr("step 120/? | epoch 1 | loss 0.4321 | step 12.3 ms"));
  EXPECT_THAT(text, HasSubstr("epoch 1: test accuracy 0.8123"));
  EXPECT_THAT(text, HasSubstr("epoch 2: test accuracy 0.8456"));
  EXPECT_THAT(text, HasSubstr("SUCCEEDED: all ranks finished"));
  EXPECT_THAT(text, HasSubstr("final accuracy  0.8456 (epoch 2)"));
  EXPECT_THAT(text, HasSubstr("equal across 2 ranks at step 300"));
  EXPECT_THAT(text, HasSubstr("max drift       0 over"));
  EXPECT_THAT(text, HasSubstr("result: PASS"));
  EXPECT_THAT(text, Not(HasSubstr("\r")));  // not a terminal
}

TEST_F(CommandsTest, WatchFailsVerdictOnUnequalGradNorms) {
  const v1::JobStatus running = RunningJob();
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(WithSteps(running, 200, 1.5, 1.5), 1)))
      .WillOnce(Return(
          Watched(Finished(WithSteps(running, 300, 1.25, 1.2500100), v1::JOB_STATE_SUCCEEDED), 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("grad norms      DIFFER at step 300: rank 0 1.25, rank 1 "
                                    "1.25001"));
  EXPECT_THAT(out_.str(), HasSubstr("result: FAIL"));
}

TEST_F(CommandsTest, WatchOfFailedJobExitsOneAndShowsRankErrors) {
  v1::JobStatus failed = Finished(RunningJob(), v1::JOB_STATE_FAILED);
  failed.mutable_ranks(1)->set_error("fingerprint mismatch");
  EXPECT_CALL(client_, Watch("j-3", 0, _)).WillOnce(Return(Watched(failed, 9)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("rank 1 failed: fingerprint mismatch"));
  EXPECT_THAT(out_.str(), HasSubstr("state           FAILED  [FAIL]"));
}

TEST_F(CommandsTest, WatchOnTerminalRewritesTheProgressLine) {
  env_.out_is_tty = true;
  const v1::JobStatus running = RunningJob();
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(running, 1)))
      .WillOnce(Return(Watched(WithSteps(running, 121, 1, 1), 2)))
      .WillOnce(Return(Watched(Finished(running, v1::JOB_STATE_CANCELLED), 3)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 120/? | epoch 1"));
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 121/? | epoch 1"));
  EXPECT_THAT(out_.str(), HasSubstr("CANCELLED"));
}

TEST_F(CommandsTest, WatchShowsTheTotalStepsTheRanksReport) {
  env_.out_is_tty = true;
  const v1::JobStatus running = RunningJob();
  v1::JobStatus stepping = WithSteps(running, 121, 1, 1);
  stepping.mutable_ranks(0)->mutable_last_step()->set_total_steps(4690);
  stepping.mutable_ranks(1)->mutable_last_step()->set_total_steps(4690);
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(stepping, 1)))
      .WillOnce(Return(Watched(Finished(running, v1::JOB_STATE_CANCELLED), 2)));
  EXPECT_EQ(RunWatch("j-3", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_THAT(out_.str(), HasSubstr("\rstep 121/4690 | epoch 1"));
}

TEST_F(CommandsTest, WatchPacesPlainProgressLinesByTheClock) {
  WatchOptions options;
  options.plain_interval = absl::Seconds(5);
  v1::JobStatus running = RunningJob();
  running.mutable_spec()->set_max_steps(500);
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(Watched(WithSteps(running, 10, 1, 1), 1)))
      .WillOnce([&](const std::string&, uint64_t, absl::Duration) {
        clock_.Advance(absl::Seconds(1));  // too soon: not printed
        return Watched(WithSteps(running, 20, 1, 1), 2);
      })
      .WillOnce([&](const std::string&, uint64_t, absl::Duration) {
        clock_.Advance(absl::Seconds(5));
        return Watched(WithSteps(running, 30, 1, 1), 3);
      })
      .WillOnce(
          Return(Watched(Finished(WithSteps(running, 40, 1, 1), v1::JOB_STATE_SUCCEEDED), 4)));
  EXPECT_EQ(RunWatch("j-3", options, client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("step 10/500"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("step 20/500")));
  EXPECT_THAT(out_.str(), HasSubstr("step 30/500"));
}

TEST_F(CommandsTest, WatchRetriesUnavailableWithBackoffThenGivesUp) {
  WatchOptions options;
  options.max_retries = 3;
  const v1::JobStatus running = RunningJob();
  EXPECT_CALL(client_, Watch("j-3", _, _))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(Watched(running, 1)))  // resets the retry budget
      .WillOnce(Return(absl::DeadlineExceededError("deadline")))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(absl::UnavailableError("connection refused")))
      .WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(RunWatch("j-3", options, client_, env_), kExitFailure);
  EXPECT_EQ(sleeps_, (std::vector<absl::Duration>{absl::Milliseconds(500), absl::Milliseconds(500),
                                                  absl::Seconds(1), absl::Seconds(2)}));
  EXPECT_THAT(err_.str(), HasSubstr("error: cannot watch job j-3: connection refused"));
}

TEST_F(CommandsTest, WatchUnknownJobExitsOneWithoutRetry) {
  EXPECT_CALL(client_, Watch("j-9", 0, _)).WillOnce(Return(absl::NotFoundError("no job j-9")));
  EXPECT_EQ(RunWatch("j-9", WatchOptions(), client_, env_), kExitFailure);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_THAT(err_.str(), HasSubstr("no job j-9 [NOT_FOUND]"));
}

TEST_F(CommandsTest, SubmitWithWatchFollowsTheNewJob) {
  SubmitOptions options;
  options.watch = true;
  EXPECT_CALL(client_, Submit(_)).WillOnce([](const v1::JobSpec& spec) {
    return Submitted("j-5", JobSpecFingerprint(spec));
  });
  v1::JobStatus done = Finished(RunningJob(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_CALL(client_, Watch("j-5", 0, _)).WillOnce(Return(Watched(done, 3)));
  EXPECT_EQ(RunSubmit(options, client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), AllOf(HasSubstr("submitted job j-5"), HasSubstr("result: PASS")));
}

}  // namespace
}  // namespace ringleader
