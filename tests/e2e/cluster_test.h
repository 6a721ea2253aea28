// A gtest fixture sharing one Cluster (cluster.h) across a test suite: started once before the
// suite's first test, stopped after its last; each test waits for the workers to be idle and
// prints the processes' log tails when it fails.
//
//   class MyE2eTest : public ClusterTest {
//    protected:
//     static void SetUpTestSuite() { StartCluster(ClusterOptions()); }
//   };
#ifndef RINGLEADER_TESTS_E2E_CLUSTER_TEST_H_
#define RINGLEADER_TESTS_E2E_CLUSTER_TEST_H_

#include <iostream>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {

class ClusterTest : public ::testing::Test {
 protected:
  // Starts the suite's cluster (fails the suite if it cannot).
  static void StartCluster(const ClusterOptions& options) {
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = started->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_TRUE(cluster_->WaitForIdleWorkers(2, absl::Seconds(30)).ok()) << cluster_->LogTails();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->LogTails() << std::endl;
  }

  // Submits `spec` and waits up to `timeout` for its end; prints how it ended.
  static JobHistory RunJob(const v1::JobSpec& spec, absl::Duration timeout) {
    absl::StatusOr<std::string> job_id = cluster_->Submit(spec);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    if (!job_id.ok()) return JobHistory();
    JobHistory history = cluster_->WaitForEnd(*job_id, timeout);
    EXPECT_TRUE(history.ended) << "job " << *job_id << " (" << spec.name()
                               << ") did not end within " << absl::FormatDuration(timeout);
    const auto& transitions = history.final.transitions();
    std::cout << spec.name() << ": " << v1::JobState_Name(history.final.state()) << " after "
              << absl::FormatDuration(history.elapsed) << ": "
              << (transitions.empty() ? "" : transitions.rbegin()->reason()) << std::endl;
    return history;
  }

  static inline Cluster* cluster_ = nullptr;
};

}  // namespace e2e
}  // namespace ringleader

#endif  // RINGLEADER_TESTS_E2E_CLUSTER_TEST_H_
