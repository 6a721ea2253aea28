// The fixture and sample jobs shared by the command tests (commands_test.cc for submit, status,
// list, workers and cancel; watch_command_test.cc for watch): a strict gMock job client, string
// streams, a fake clock and recorded sleeps.
#ifndef RINGLEADER_CLIENT_COMMANDS_TEST_UTIL_H_
#define RINGLEADER_CLIENT_COMMANDS_TEST_UTIL_H_

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/commands.h"
#include "client/mock_job_client.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {

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

  ::testing::StrictMock<MockJobClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  std::vector<absl::Duration> sleeps_;
  std::map<std::string, std::string> files_;
  CommandEnvironment env_;
};


inline v1::SubmitJobResponse Submitted(const std::string& id, const std::string& fingerprint) {
  v1::SubmitJobResponse response;
  response.set_job_id(id);
  response.set_spec_fingerprint(fingerprint);
  return response;
}

// A RUNNING job of two ranks at step 120 with one epoch report.
inline v1::JobStatus RunningJob() {
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

// What the coordinator answers for a job of 3 ranks while 2 workers are registered: QUEUED,
// with its reason (coordinator/core/scheduler.cc: WhyQueued).
inline constexpr char kTooFewWorkers[] =
    "world_size 3 > 2 registered workers: register more workers or lower world_size";

inline v1::JobStatus QueuedJob() {
  v1::JobStatus job;
  job.set_job_id("j-4");
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_spec_fingerprint("fedcba9876543210");
  job.mutable_spec()->set_name("wide");
  job.mutable_spec()->set_world_size(3);
  job.mutable_spec()->set_backend("gloo");
  job.set_submit_time_unix_ms(1'700'000'050'000);
  v1::StateTransition* transition = job.add_transitions();
  transition->set_state(v1::JOB_STATE_QUEUED);
  transition->set_time_unix_ms(1'700'000'050'000);
  transition->set_reason("submitted");
  job.set_queued_reason(kTooFewWorkers);
  return job;
}

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_COMMANDS_TEST_UTIL_H_
