// gMock implementation of CoordinatorClient for tests of the daemon, the key-value store and the
// rank logic. Test-only.
#ifndef RINGLEADER_WORKER_COORDINATOR_CLIENT_MOCK_COORDINATOR_CLIENT_H_
#define RINGLEADER_WORKER_COORDINATOR_CLIENT_MOCK_COORDINATOR_CLIENT_H_

#include "gmock/gmock.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

class MockCoordinatorClient : public CoordinatorClient {
 public:
  MOCK_METHOD(absl::StatusOr<v1::RegisterWorkerResponse>, RegisterWorker,
              (const v1::RegisterWorkerRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::HeartbeatResponse>, Heartbeat, (const v1::HeartbeatRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::WaitAssignmentResponse>, WaitAssignment,
              (const v1::WaitAssignmentRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::JoinJobResponse>, JoinJob, (const v1::JoinJobRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::KvSetResponse>, KvSet, (const v1::KvSetRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::KvGetResponse>, KvGet, (const v1::KvGetRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::KvGetManyResponse>, KvGetMany, (const v1::KvGetManyRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::ReportProgressResponse>, ReportProgress,
              (const v1::ReportProgressRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::FinishRankResponse>, FinishRank,
              (const v1::FinishRankRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::AppendLogsResponse>, AppendLogs,
              (const v1::AppendLogsRequest&), (override));
  MOCK_METHOD(void, CancelAll, (), (override));
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COORDINATOR_CLIENT_MOCK_COORDINATOR_CLIENT_H_
