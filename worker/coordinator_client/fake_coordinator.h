// Test helper: a CoordinatorClient for rank processes run in-process (training_loop tests) and
// for the daemon's log shipper: it records what the ranks report and the output shipped, and
// answers like the coordinator would.
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_FAKE_COORDINATOR_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_FAKE_COORDINATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

// Records JoinJob / ReportProgress / FinishRank / AppendLogs per rank; answers `stop` once a
// rank reported step `stop_at_step`. Thread-safe.
class FakeCoordinator : public CoordinatorClient {
 public:
  explicit FakeCoordinator(std::string fingerprint) : fingerprint_(std::move(fingerprint)) {}

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest&) override {
    return absl::UnimplementedError("not for ranks");
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest&) override {
    return absl::UnimplementedError("not for ranks");
  }
  absl::StatusOr<v1::WaitAssignmentResponse> WaitAssignment(
      const v1::WaitAssignmentRequest&) override {
    return absl::UnimplementedError("not for ranks");
  }
  absl::StatusOr<v1::JoinJobResponse> JoinJob(const v1::JoinJobRequest& request) override {
    absl::MutexLock lock(&mu_);
    joins_[request.rank()] = request;
    if (request.spec_fingerprint() != fingerprint_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", request.rank(), " joined with spec fingerprint ", request.spec_fingerprint()));
    }
    return v1::JoinJobResponse();
  }
  absl::StatusOr<v1::KvSetResponse> KvSet(const v1::KvSetRequest&) override {
    return absl::UnimplementedError("the test's collectives use their own store");
  }
  absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest&) override {
    return absl::UnimplementedError("the test's collectives use their own store");
  }
  absl::StatusOr<v1::KvGetManyResponse> KvGetMany(const v1::KvGetManyRequest&) override {
    return absl::UnimplementedError("the test's collectives use their own store");
  }
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(
      const v1::ReportProgressRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (unreachable_) return absl::UnavailableError("coordinator unreachable (test)");
    v1::ReportProgressResponse response;
    if (told_to_stop_[request.rank()]) steps_after_stop_[request.rank()] += request.steps_size();
    for (const auto& step : request.steps()) {
      steps_[request.rank()].push_back(step);
      if (stop_at_step_ > 0 && step.step() >= stop_at_step_) {
        response.set_stop(true);
        response.set_stop_reason("cancelled by the test");
      }
    }
    if (response.stop()) told_to_stop_[request.rank()] = true;
    for (const auto& epoch : request.epochs()) epochs_[request.rank()].push_back(epoch);
    if (request.steps().empty() && request.epochs().empty()) {
      ++probes_;
      if (over_after_probes_ > 0 && probes_ >= over_after_probes_) response.set_stop(true);
    }
    return response;
  }
  absl::StatusOr<v1::FinishRankResponse> FinishRank(const v1::FinishRankRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (unreachable_) return absl::UnavailableError("coordinator unreachable (test)");
    finishes_[request.rank()].push_back(request);
    return v1::FinishRankResponse();
  }
  absl::StatusOr<v1::AppendLogsResponse> AppendLogs(
      const v1::AppendLogsRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++append_calls_;
    if (unreachable_) return absl::UnavailableError("coordinator unreachable (test)");
    if (logs_over_) {
      return absl::FailedPreconditionError(
          absl::StrCat("stale generation ", request.generation(), " (test)"));
    }
    appends_[request.rank()].push_back(request);
    return v1::AppendLogsResponse();
  }
  void CancelAll() override {}

  // While set, ReportProgress, FinishRank and AppendLogs answer UNAVAILABLE (a coordinator
  // outage).
  void set_unreachable(bool unreachable) {
    absl::MutexLock lock(&mu_);
    unreachable_ = unreachable;
  }
  void set_stop_at_step(uint64_t step) {
    absl::MutexLock lock(&mu_);
    stop_at_step_ = step;
  }
  // Empty ReportProgress calls answer stop from the n-th on (0 = never).
  void set_over_after_probes(int n) {
    absl::MutexLock lock(&mu_);
    over_after_probes_ = n;
  }
  int probes() {
    absl::MutexLock lock(&mu_);
    return probes_;
  }
  // Step reports rank `rank` sent after an answer told it to stop.
  int steps_after_stop(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return steps_after_stop_[rank];
  }
  std::vector<v1::StepReport> steps(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return steps_[rank];
  }
  std::vector<v1::EpochReport> epochs(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return epochs_[rank];
  }
  std::vector<v1::FinishRankRequest> finishes(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return finishes_[rank];
  }
  v1::JoinJobRequest join(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return joins_[rank];
  }
  // While set, AppendLogs answers FAILED_PRECONDITION (the attempt is over).
  void set_logs_over(bool over) {
    absl::MutexLock lock(&mu_);
    logs_over_ = over;
  }
  // The AppendLogs calls accepted for `rank`, in order.
  std::vector<v1::AppendLogsRequest> appends(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    return appends_[rank];
  }
  // AppendLogs calls made, accepted or not.
  int append_calls() {
    absl::MutexLock lock(&mu_);
    return append_calls_;
  }
  // Waits up to `timeout` until the accepted appends of `rank` reach byte `end` of its output.
  bool WaitForLogs(uint32_t rank, uint64_t end, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const std::vector<v1::AppendLogsRequest>& got = appends_[rank];
      return !got.empty() && got.back().offset() + got.back().data().size() >= end;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  const std::string fingerprint_;
  absl::Mutex mu_;
  uint64_t stop_at_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint32_t, bool> told_to_stop_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, int> steps_after_stop_ ABSL_GUARDED_BY(mu_);
  int over_after_probes_ ABSL_GUARDED_BY(mu_) = 0;
  int probes_ ABSL_GUARDED_BY(mu_) = 0;
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
  bool logs_over_ ABSL_GUARDED_BY(mu_) = false;
  int append_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint32_t, std::vector<v1::AppendLogsRequest>> appends_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, v1::JoinJobRequest> joins_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<v1::StepReport>> steps_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<v1::EpochReport>> epochs_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<v1::FinishRankRequest>> finishes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_FAKE_COORDINATOR_H_
