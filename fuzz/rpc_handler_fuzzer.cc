// Fuzz target: the coordinator's RPC handlers (coordinator/rpc/rpc_handler.h) on one in-process
// Coordinator with a fake clock and an in-memory job store: what a gRPC client can send, in
// any order, proto in and status out.
//
// Input: rpc_sequence.h (an options byte, then (operation, serialized request) records);
// records whose bytes do not parse as their request are skipped. Long polls take the request's
// wait_timeout_ms on the fake clock, which only the kAdvanceClock records move.
// Holds: no crash, hang or sanitizer report; no status UNKNOWN or INTERNAL; every long poll is
// answered exactly once, at the latest when the clock has passed its deadline (max_wait after
// the call at most); successful answers carry what they promise (ids, a 16-digit fingerprint).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/rpc/rpc_stats.h"
#include "coordinator/store/job_store.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/rpc_sequence.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

constexpr size_t kMaxRecords = 256;
constexpr uint32_t kMaxAdvanceMs = 3600 * 1000;

void CheckStatus(const char* method, const absl::Status& status) {
  FUZZ_CHECK(status.code() != absl::StatusCode::kUnknown &&
                 status.code() != absl::StatusCode::kInternal,
             method, ": ", status);
}

// A long poll in flight: its response (written by the handler until `done`) and its answers.
struct Poll {
  const char* method = "";
  std::unique_ptr<google::protobuf::Message> response;
  int answers = 0;
  absl::Status status;
};

class Harness {
 public:
  explicit Harness(uint8_t options)
      : coordinator_(Options(options), &clock_, &store_),
        handler_(&coordinator_, (options & fuzz::kCountCalls) != 0 ? &stats_ : nullptr) {}

  static CoordinatorOptions Options(uint8_t options) {
    CoordinatorOptions o;
    o.allow_fault_injection = (options & fuzz::kAllowFaultInjection) != 0;
    // Small enough that the limits are reached within one input.
    o.max_queued_jobs = 8;
    o.max_log_bytes_per_rank = 4096;
    o.max_log_bytes_per_job = 8192;
    o.max_log_bytes_total = 16384;
    o.max_log_bytes_per_answer = 2048;
    o.max_reports_per_second_per_rank = 8;
    o.max_finished_jobs_kept = 2;  // so ending a third job archives one
    return o;
  }

  void Run(fuzz::Operation op, const std::string& bytes) {
    switch (op) {
      case fuzz::kRegisterWorker: {
        v1::RegisterWorkerResponse response;
        Unary<v1::RegisterWorkerRequest>("RegisterWorker", bytes, &response,
                                         &RpcHandler::RegisterWorker, [&] {
                                           FUZZ_CHECK(!response.worker_id().empty(),
                                                      "registered without an id");
                                         });
        break;
      }
      case fuzz::kHeartbeat: {
        v1::HeartbeatResponse response;
        Unary<v1::HeartbeatRequest>("Heartbeat", bytes, &response, &RpcHandler::Heartbeat);
        break;
      }
      case fuzz::kJoinJob: {
        v1::JoinJobResponse response;
        Unary<v1::JoinJobRequest>("JoinJob", bytes, &response, &RpcHandler::JoinJob);
        break;
      }
      case fuzz::kKvSet: {
        v1::KvSetResponse response;
        Unary<v1::KvSetRequest>("KvSet", bytes, &response, &RpcHandler::KvSet);
        break;
      }
      case fuzz::kReportProgress: {
        v1::ReportProgressResponse response;
        Unary<v1::ReportProgressRequest>("ReportProgress", bytes, &response,
                                         &RpcHandler::ReportProgress);
        break;
      }
      case fuzz::kFinishRank: {
        v1::FinishRankResponse response;
        Unary<v1::FinishRankRequest>("FinishRank", bytes, &response, &RpcHandler::FinishRank);
        break;
      }
      case fuzz::kAppendLogs: {
        v1::AppendLogsResponse response;
        Unary<v1::AppendLogsRequest>("AppendLogs", bytes, &response, &RpcHandler::AppendLogs);
        break;
      }
      case fuzz::kSubmitJob: {
        v1::SubmitJobResponse response;
        Unary<v1::SubmitJobRequest>("SubmitJob", bytes, &response, &RpcHandler::SubmitJob, [&] {
          FUZZ_CHECK(!response.job_id().empty(), "submitted without an id");
          FUZZ_CHECK(response.spec_fingerprint().size() == 16, "fingerprint '",
                     response.spec_fingerprint(), "'");
        });
        break;
      }
      case fuzz::kGetJob: {
        v1::GetJobResponse response;
        Unary<v1::GetJobRequest>("GetJob", bytes, &response, &RpcHandler::GetJob);
        break;
      }
      case fuzz::kGetJobMetrics: {
        v1::GetJobMetricsResponse response;
        Unary<v1::GetJobMetricsRequest>("GetJobMetrics", bytes, &response,
                                        &RpcHandler::GetJobMetrics);
        break;
      }
      case fuzz::kListJobs: {
        v1::ListJobsResponse response;
        Unary<v1::ListJobsRequest>("ListJobs", bytes, &response, &RpcHandler::ListJobs);
        break;
      }
      case fuzz::kListWorkers: {
        v1::ListWorkersResponse response;
        Unary<v1::ListWorkersRequest>("ListWorkers", bytes, &response, &RpcHandler::ListWorkers);
        break;
      }
      case fuzz::kCancelJob: {
        v1::CancelJobResponse response;
        Unary<v1::CancelJobRequest>("CancelJob", bytes, &response, &RpcHandler::CancelJob);
        break;
      }
      case fuzz::kWaitAssignment:
        LongPoll<v1::WaitAssignmentRequest, v1::WaitAssignmentResponse>(
            "WaitAssignment", bytes, &RpcHandler::WaitAssignment);
        break;
      case fuzz::kKvGet:
        LongPoll<v1::KvGetRequest, v1::KvGetResponse>("KvGet", bytes, &RpcHandler::KvGet);
        break;
      case fuzz::kKvGetMany:
        LongPoll<v1::KvGetManyRequest, v1::KvGetManyResponse>("KvGetMany", bytes,
                                                              &RpcHandler::KvGetMany);
        break;
      case fuzz::kWatchJob:
        LongPoll<v1::WatchJobRequest, v1::WatchJobResponse>("WatchJob", bytes,
                                                            &RpcHandler::WatchJob);
        break;
      case fuzz::kGetLogs:
        LongPoll<v1::GetLogsRequest, v1::GetLogsResponse>("GetLogs", bytes, &RpcHandler::GetLogs);
        break;
      case fuzz::kAdvanceClock: {
        fuzz::InputReader ms(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        Advance(absl::Milliseconds(ms.U32() % (kMaxAdvanceMs + 1)));
        break;
      }
      case fuzz::kOperationCount:
        break;
    }
  }

  // Past every deadline: each long poll must have been answered, once.
  void Finish() {
    const CoordinatorOptions& options = coordinator_.options();
    Advance(options.max_wait + options.log_linger + absl::Seconds(1));
    for (const Poll& poll : polls_) {
      FUZZ_CHECK(poll.answers == 1, poll.method, " answered ", poll.answers,
                 " times by the time its deadline (at most max_wait) had passed");
    }
    coordinator_.Shutdown();
    for (const Poll& poll : polls_) {
      FUZZ_CHECK(poll.answers == 1, poll.method, " answered again at shutdown");
    }
  }

 private:
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    coordinator_.CheckStaleness();
  }

  template <typename Request, typename Response, typename Method, typename OnOk>
  void Unary(const char* name, const std::string& bytes, Response* response, Method method,
             OnOk on_ok) {
    Request request;
    if (!request.ParseFromString(bytes)) return;
    const absl::Status status = (handler_.*method)(request, response);
    CheckStatus(name, status);
    if (status.ok()) on_ok();
  }
  template <typename Request, typename Response, typename Method>
  void Unary(const char* name, const std::string& bytes, Response* response, Method method) {
    Unary<Request>(name, bytes, response, method, [] {});
  }

  template <typename Request, typename Response, typename Method>
  void LongPoll(const char* name, const std::string& bytes, Method method) {
    Request request;
    if (!request.ParseFromString(bytes)) return;
    polls_.emplace_back();
    Poll* poll = &polls_.back();  // a deque: stays put while more are added
    poll->method = name;
    poll->response = std::make_unique<Response>();
    (handler_.*method)(request, static_cast<Response*>(poll->response.get()),
                       [poll](absl::Status status) {
                         ++poll->answers;
                         poll->status = status;
                         CheckStatus(poll->method, status);
                       });
  }

  FakeClock clock_;
  InMemoryJobStore store_;
  RpcStats stats_;
  std::deque<Poll> polls_;  // declared before the coordinator: outlives its callbacks
  Coordinator coordinator_;
  RpcHandler handler_;
};

}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringleader::fuzz::InputReader in(data, size);
  ringleader::Harness harness(in.Byte());
  for (size_t records = 0; records < ringleader::kMaxRecords && in.remaining() > 0; ++records) {
    const auto op =
        static_cast<ringleader::fuzz::Operation>(in.Byte() % ringleader::fuzz::kOperationCount);
    const std::string bytes = in.Bytes(in.U16());
    harness.Run(op, bytes);
  }
  harness.Finish();
  return 0;
}
