#include "client/commands.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/commands_test_util.h"
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

TEST_F(CommandsTest, SubmitServerRejectionIsUsageErrorUnreachableExitsThree) {
  EXPECT_CALL(client_, Submit(_))
      .WillOnce(Return(absl::InvalidArgumentError("model.layers[1]: too wide for this cluster")))
      .WillOnce(Return(absl::UnavailableError("connection refused")));
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("error: the coordinator rejected the job spec: "
                                    "model.layers[1]: too wide for this cluster"));
  err_.str("");
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitUnreachable);
  EXPECT_THAT(err_.str(), HasSubstr("error: submit failed: connection refused [UNAVAILABLE]"));
  EXPECT_THAT(err_.str(), HasSubstr("is the coordinator running at 10.0.0.1:7070?"));
}

TEST_F(CommandsTest, SubmitNotesAFingerprintMismatch) {
  EXPECT_CALL(client_, Submit(_)).WillOnce(Return(Submitted("j-1", "ffffffffffffffff")));
  EXPECT_EQ(RunSubmit(SubmitOptions(), client_, env_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("note: the coordinator's spec fingerprint differs"));
}

// ----- status / list / workers / cancel -----------------------------------------------------


TEST_F(CommandsTest, StatusShowsWhereEachRankIsWhileTheAttemptRuns) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  v1::RankStatus* stopped = response.mutable_job()->mutable_ranks(1);
  stopped->mutable_activity()->set_phase(v1::RANK_PHASE_CONNECTING);
  stopped->mutable_activity()->set_detail("to rank 0 at 10.1.0.1:41729");
  stopped->mutable_activity()->set_phase_elapsed_ms(15200);
  stopped->set_silent_ms(8200);
  stopped->set_process_state("stopped");
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("activity\n"));
  EXPECT_THAT(text, HasSubstr("1     connecting (to rank 0 at 10.1.0.1:41729) for 15.2s  8.2s    "
                              "stopped"));
  // A rank that never said its phase gets no row.
  EXPECT_THAT(text, Not(HasSubstr("\n0     connecting")));
}

TEST_F(CommandsTest, StatusShowsEachRanksMeasuredMemoryBesideThePrediction) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  v1::JobSpec* spec = response.mutable_job()->mutable_spec();
  spec->set_strategy("zero1");
  spec->mutable_data()->set_dataset("synthetic");
  for (uint32_t width : {4u, 3u, 2u}) spec->mutable_model()->add_layers(width);
  // Rank 0 holds what plan/memory_plan.h predicts for it (23 parameters, 2 ranks, zero1:
  // 92 + 96 + 44 + 144 bytes) and a heap growth of 3 KiB; rank 1 reports more than its 380
  // predicted and no heap growth (not measured); no rank 2.
  auto report = [&](int r, uint64_t optimizer, uint64_t heap) {
    v1::RankMemory* memory = response.mutable_job()->mutable_ranks(r)->mutable_memory();
    memory->set_parameter_bytes(92);
    memory->set_gradient_bytes(96);
    memory->set_optimizer_bytes(optimizer);
    memory->set_comm_buffer_bytes(144);
    memory->set_total_bytes(92 + 96 + optimizer + 144);
    memory->set_allocator_bytes(heap);
  };
  report(0, 44, 3072);
  report(1, 2048, 0);
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("memory per rank (measured after its first step)\n"
                              "  RANK  TOTAL              PREDICTED      PARAMETERS  GRADIENTS  "
                              "OPTIMIZER  COMM_BUFFERS  HEAP_GROWTH\n"
                              "  0     376 B (376 B)      376 B (equal)  92 B        96 B       "
                              "44 B       144 B         3.00 KiB\n"
                              "  1     2.32 KiB (2380 B)  380 B          92 B        96 B       "
                              "2.00 KiB   144 B         -\n"
                              "HEAP_GROWTH: the C heap's high-water growth"));
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
  EXPECT_THAT(text, HasSubstr("verdict      not judged yet (0 steps judged)\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nalarms\n")));
  EXPECT_THAT(text, Not(HasSubstr("\nstragglers\n")));
  EXPECT_THAT(text, Not(HasSubstr("spares")));  // none asked
}

TEST_F(CommandsTest, StatusNamesTheHotSparesHeld) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  response.mutable_job()->mutable_spec()->set_spares(2);
  response.mutable_job()->add_spare_workers("node2 on host2");
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("spares       1 of 2 held: node2 on host2\n"));
}

TEST_F(CommandsTest, StatusShowsTheVerdictAlarmsAndStragglers) {
  v1::GetJobResponse response;
  v1::JobStatus& job = *response.mutable_job() = RunningJob();
  v1::Verdict* verdict = job.mutable_verdict();
  verdict->set_result(v1::Verdict::WARN);
  verdict->set_steps_judged(120);
  verdict->set_last_step(120);
  verdict->set_samples_per_second(10410.7);
  v1::Alarm* alarm = job.add_alarms();
  alarm->set_kind(v1::Alarm::STRAGGLER);
  alarm->set_step(100);
  alarm->add_ranks(1);
  alarm->set_message("steps 51-100: rank 1 is a straggler: median compute 30.0 ms vs 10.0 ms");
  alarm->set_repeats(20);
  alarm->set_last_step(120);
  const double step_ms[] = {36, 36.5};
  const double compute_ms[] = {10, 30};
  const double comm_ms[] = {25.5, 5.5};
  for (uint32_t r = 0; r < 2; ++r) {
    v1::StragglerScore* score = job.add_stragglers();
    score->set_rank(r);
    score->set_score(r);
    score->set_median_step_ms(step_ms[r]);
    score->set_median_compute_ms(compute_ms[r]);
    score->set_median_comm_ms(comm_ms[r]);
    score->set_ratio_to_median(r == 0 ? 0.5 : 1.5);
    score->set_flagged(r == 1);
    if (r == 1) score->set_suspected_cause("compute");
  }
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("verdict      WARN (120 steps judged, 10411 train samples/s)\n"));
  EXPECT_THAT(text, HasSubstr("\nalarms\n"
                              "  STRAGGLER at step 100, rank 1: steps 51-100: rank 1 is a "
                              "straggler: median compute 30.0 ms vs 10.0 ms (+20 later steps, "
                              "last at step 120)  [warning]\n"));
  EXPECT_THAT(text, HasSubstr("\nstragglers\n"
                              "  RANK  SCORE  WAIT_CAUSED_MS  LAST_ARRIVAL  MEDIAN_STEP_MS  "
                              "MEDIAN_COMPUTE_MS  MEDIAN_COMM_MS  RATIO  FLAGGED  SUSPECTED_CAUSE\n"
                              "  0     0      0               0             36              10"
                              "                 25.5            0.5    no       -\n"
                              "  1     1      0               0             36.5            30"
                              "                 5.5             1.5    yes      compute\n"));
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
  worker->set_topology("rack1/node0");
  worker->set_state(v1::WORKER_STATE_BUSY);
  worker->set_job_id("j-3");
  worker->set_rank(0);
  worker->set_heartbeat_age_ms(300);
  v1::Device* device = worker->add_devices();
  device->set_kind("cpu");
  EXPECT_CALL(client_, List(false)).WillOnce(Return(jobs));
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(workers));
  EXPECT_EQ(RunList(ListOptions(), client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("JOB  NAME    STATE    WORLD  BACKEND  GEN  STEP  ACCURACY"));
  EXPECT_THAT(out_.str(), HasSubstr("j-3  fmnist  RUNNING  2      gloo     2    120   0.8123"));
  out_.str("");
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_THAT(out_.str(),
              HasSubstr("WORKER  NAME   HOST   STATE  DEVICES  TOPOLOGY     JOB  RANK  HEARTBEAT"));
  EXPECT_THAT(out_.str(),
              HasSubstr("w-0     node0  host0  BUSY   cpu:0    rack1/node0  j-3  0     300ms"));
  // A coordinator from before topologies: the host stands for it.
  worker->clear_topology();
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(workers));
  out_.str("");
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("w-0     node0  host0  BUSY   cpu:0    host0     j-3  0"));
}

TEST_F(CommandsTest, StatusAndWorkersNameTheLeaderThatAnswered) {
  client_.answering_leader = "10.0.0.2:7070";
  v1::GetJobResponse job;
  *job.mutable_job() = RunningJob();
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(job));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("fmnist"));
  EXPECT_THAT(out_.str(), testing::EndsWith("\ncoordinator: 10.0.0.2:7070 (leader)\n"));
  out_.str("");
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(v1::ListWorkersResponse()));
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_EQ(out_.str(), "no workers registered\ncoordinator: 10.0.0.2:7070 (leader)\n");
  // JSON stays the API's message alone.
  out_.str("");
  env_.json = true;
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(v1::ListWorkersResponse()));
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), testing::Not(HasSubstr("coordinator:")));
}

TEST_F(CommandsTest, ASingleCoordinatorIsNotNamed) {
  EXPECT_CALL(client_, ListWorkers()).WillOnce(Return(v1::ListWorkersResponse()));
  EXPECT_EQ(RunWorkers(client_, env_), kExitOk);
  EXPECT_EQ(out_.str(), "no workers registered\n");
}

TEST_F(CommandsTest, StatusSaysWhyAQueuedJobWaits) {
  v1::GetJobResponse response;
  *response.mutable_job() = QueuedJob();
  EXPECT_CALL(client_, Get("j-4")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-4", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("state        QUEUED\nwaiting      ",
                                                 kTooFewWorkers, "\n")));
}

TEST_F(CommandsTest, StatusOfAJobNotQueuedHasNoWaitingLine) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  // Even with a reason left over, only a QUEUED job waits.
  response.mutable_job()->set_queued_reason(kTooFewWorkers);
  EXPECT_CALL(client_, Get("j-3")).WillRepeatedly(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("state        RUNNING\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("waiting")));
  EXPECT_THAT(out_.str(), Not(HasSubstr("registered workers")));

  // A QUEUED job the coordinator gave no reason for (yet) has none either.
  *response.mutable_job() = QueuedJob();
  response.mutable_job()->clear_queued_reason();
  EXPECT_CALL(client_, Get("j-4")).WillOnce(Return(response));
  out_.str("");
  EXPECT_EQ(RunStatus("j-4", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("state        QUEUED\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("waiting")));
}

TEST_F(CommandsTest, ListSaysWhyAQueuedJobWaitsOnItsOwnLine) {
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = RunningJob();
  *jobs.add_jobs() = QueuedJob();
  EXPECT_CALL(client_, List(false)).WillOnce(Return(jobs));
  EXPECT_EQ(RunList(ListOptions(), client_, env_), kExitOk);
  const std::string text = out_.str();
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << text;  // the header and one line per job
  EXPECT_THAT(lines[0], HasSubstr("STATE    WORLD  BACKEND"));
  EXPECT_THAT(lines[0], ::testing::EndsWith("SUBMITTED                    WAITING"));
  EXPECT_THAT(lines[1], HasSubstr("j-3  fmnist  RUNNING  2      gloo"));
  EXPECT_THAT(lines[1], ::testing::EndsWith("  -"));
  EXPECT_THAT(lines[2], HasSubstr("j-4  wide    QUEUED   3      gloo"));
  EXPECT_THAT(lines[2], ::testing::EndsWith(absl::StrCat("2023-11-14 22:14:10.000 UTC  ",
                                                         kTooFewWorkers)));
}

TEST_F(CommandsTest, ListHasNoWaitingColumnWhileNoJobWaits) {
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = RunningJob();
  jobs.mutable_jobs(0)->set_queued_reason(kTooFewWorkers);  // not QUEUED: ignored
  EXPECT_CALL(client_, List(false)).WillOnce(Return(jobs));
  EXPECT_EQ(RunList(ListOptions(), client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), Not(HasSubstr("WAITING")));
  EXPECT_THAT(out_.str(), Not(HasSubstr("registered workers")));
}

TEST_F(CommandsTest, StatusOfAnArchivedJobSaysSo) {
  v1::GetJobResponse response;
  *response.mutable_job() = RunningJob();
  response.mutable_job()->set_state(v1::JOB_STATE_SUCCEEDED);
  response.mutable_job()->set_archived(true);
  EXPECT_CALL(client_, Get("j-3")).WillOnce(Return(response));
  EXPECT_EQ(RunStatus("j-3", client_, env_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("state        SUCCEEDED\narchived     yes: its final "
                                    "status, from the coordinator's job store"));
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

}  // namespace
}  // namespace ringleader
