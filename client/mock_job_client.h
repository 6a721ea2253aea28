// gMock JobClient for CLI tests.
#ifndef RINGLEADER_CLIENT_MOCK_JOB_CLIENT_H_
#define RINGLEADER_CLIENT_MOCK_JOB_CLIENT_H_

#include <string>

#include "client/job_client.h"
#include "gmock/gmock.h"

namespace ringleader {

class MockJobClient : public JobClient {
 public:
  MOCK_METHOD(absl::StatusOr<v1::SubmitJobResponse>, Submit, (const v1::JobSpec& spec), (override));
  MOCK_METHOD(absl::StatusOr<v1::GetJobResponse>, Get, (const std::string& job_id), (override));
  MOCK_METHOD(absl::StatusOr<v1::WatchJobResponse>, Watch,
              (const std::string& job_id, uint64_t after_version, absl::Duration wait), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListJobsResponse>, List, (bool include_archived), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListWorkersResponse>, ListWorkers, (), (override));
  MOCK_METHOD(absl::StatusOr<v1::CancelJobResponse>, Cancel,
              (const std::string& job_id, const std::string& reason), (override));
  MOCK_METHOD(absl::StatusOr<v1::GetJobMetricsResponse>, GetJobMetrics,
              (const std::string& job_id), (override));
  MOCK_METHOD(absl::StatusOr<v1::GetLogsResponse>, GetLogs, (const v1::GetLogsRequest& request),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::DebugJobResponse>, Debug,
              (const std::string& job_id, uint32_t wait_ms), (override));

  // What AnsweringLeader returns (a plain value, not an expectation: any command may ask).
  std::string answering_leader;
  std::string AnsweringLeader() const override { return answering_leader; }
};

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_MOCK_JOB_CLIENT_H_
