#include "client/grpc_job_client.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/coordinator_addresses.h"
#include "proto/ringleader.grpc.pb.h"

namespace ringleader {
namespace {

// Stands for the channel given to NewGrpcJobClient in the tracker (no port: never an address).
constexpr char kGivenChannel[] = "(the given channel)";

// How many times one call follows a standby's hint before giving up.
constexpr int kMaxRedirects = 4;

// Whether a call that failed without reaching a standby may go to the next coordinator.
enum class OnOtherCoordinators { kRetry, kDoNotRetry };
constexpr auto kReads = OnOtherCoordinators::kRetry;
constexpr auto kWrites = OnOtherCoordinators::kDoNotRetry;
// How long a write waits for a connection to a coordinator of a list before trying the next.
constexpr absl::Duration kConnectTimeout = absl::Seconds(3);

class GrpcJobClient : public JobClient {
 public:
  GrpcJobClient(std::vector<std::string> addresses, GrpcJobClientOptions options)
      : options_(std::move(options)), tracker_(std::move(addresses)) {}
  GrpcJobClient(std::shared_ptr<grpc::Channel> channel, GrpcJobClientOptions options)
      : options_(std::move(options)), tracker_({kGivenChannel}) {
    absl::MutexLock lock(&stubs_mu_);
    stubs_[kGivenChannel] = v1::JobService::NewStub(std::move(channel));
  }

  absl::StatusOr<v1::SubmitJobResponse> Submit(const v1::JobSpec& spec) override {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    return Call(kWrites, &v1::JobService::Stub::SubmitJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetJobResponse> Get(const std::string& job_id) override {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    return Call(kReads, &v1::JobService::Stub::GetJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::WatchJobResponse> Watch(const std::string& job_id, uint64_t after_version,
                                             absl::Duration wait) override {
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_after_version(after_version);
    request.set_wait_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(wait)));
    return Call(kReads, &v1::JobService::Stub::WatchJob, request, wait);
  }

  // Every page, concatenated (the coordinator answers at most 1000 a call).
  absl::StatusOr<v1::ListJobsResponse> List(bool include_archived) override {
    v1::ListJobsResponse all;
    v1::ListJobsRequest request;
    request.set_include_archived(include_archived);
    do {
      absl::StatusOr<v1::ListJobsResponse> page =
          Call(kReads, &v1::JobService::Stub::ListJobs, request, absl::ZeroDuration());
      if (!page.ok()) return page.status();
      for (v1::JobStatus& job : *page->mutable_jobs()) *all.add_jobs() = std::move(job);
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty());
    return all;
  }

  absl::StatusOr<v1::ListWorkersResponse> ListWorkers() override {
    v1::ListWorkersResponse all;
    v1::ListWorkersRequest request;
    do {
      absl::StatusOr<v1::ListWorkersResponse> page =
          Call(kReads, &v1::JobService::Stub::ListWorkers, request, absl::ZeroDuration());
      if (!page.ok()) return page.status();
      for (v1::WorkerStatus& worker : *page->mutable_workers()) {
        *all.add_workers() = std::move(worker);
      }
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty());
    return all;
  }

  absl::StatusOr<v1::CancelJobResponse> Cancel(const std::string& job_id,
                                               const std::string& reason) override {
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    request.set_reason(reason);
    return Call(kWrites, &v1::JobService::Stub::CancelJob, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetJobMetricsResponse> GetJobMetrics(const std::string& job_id) override {
    v1::GetJobMetricsRequest request;
    request.set_job_id(job_id);
    return Call(kReads, &v1::JobService::Stub::GetJobMetrics, request, absl::ZeroDuration());
  }

  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& request) override {
    return Call(kReads, &v1::JobService::Stub::GetLogs, request,
                absl::Milliseconds(request.wait_timeout_ms()));
  }

  absl::StatusOr<v1::DebugJobResponse> Debug(const std::string& job_id,
                                             uint32_t wait_ms) override {
    v1::DebugJobRequest request;
    request.set_job_id(job_id);
    request.set_wait_ms(wait_ms);
    return Call(kReads, &v1::JobService::Stub::DebugJob, request,
                absl::Milliseconds(wait_ms == 0 ? 5000 : wait_ms));
  }

  absl::StatusOr<v1::RunDoctorResponse> RunDoctor(const v1::RunDoctorRequest& request) override {
    return Call(kWrites, &v1::JobService::Stub::RunDoctor, request,
                absl::Milliseconds(request.wait_timeout_ms() == 0 ? 30000
                                                                  : request.wait_timeout_ms()));
  }

  absl::StatusOr<v1::UncordonWorkerResponse> Uncordon(const std::string& worker) override {
    v1::UncordonWorkerRequest request;
    request.set_worker(worker);
    return Call(kWrites, &v1::JobService::Stub::UncordonWorker, request, absl::ZeroDuration());
  }

  std::string AnsweringLeader() const override {
    absl::MutexLock lock(&answered_mu_);
    return answering_leader_;
  }

 private:
  template <typename Request, typename Response>
  using Method = grpc::Status (v1::JobService::Stub::*)(grpc::ClientContext*, const Request&,
                                                        Response*);

  // The call on the current coordinator, following standbys to the leader (see the header).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(OnOtherCoordinators others, Method<Request, Response> method,
                                const Request& request, absl::Duration extra) {
    int redirects = 0;
    size_t tried_without_hint = 1;
    for (;;) {
      const std::string address = tracker_.current();
      // A write is not sent again after UNAVAILABLE (it may have run), so with a list it goes
      // only over a connection that is up: a coordinator that cannot be reached is skipped
      // before anything is sent.
      if (others == OnOtherCoordinators::kDoNotRetry && tracker_.size() > 1 &&
          !Reachable(address)) {
        tracker_.OnRefused(address, "");
        if (++tried_without_hint <= tracker_.size()) continue;
        return absl::UnavailableError(absl::StrCat(
            "no coordinator of the list answered (", absl::StrJoin(tracker_.addresses(), ","),
            "): nothing was sent"));
      }
      std::string leader;
      Response response;
      grpc::Status status = CallOnce(address, method, request, extra, &response, &leader);
      if (status.ok()) {
        NoteAnswered(address, redirects > 0);
        return response;
      }
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(status);
      if (leader == address) leader.clear();  // not a standby's hint: the leader itself failed
      tracker_.OnRefused(address, leader);
      if (!leader.empty()) {
        // A standby did not execute the call: the leader gets it, whatever it is.
        if (++redirects <= kMaxRedirects) continue;
      } else if (others == OnOtherCoordinators::kRetry &&
                 ++tried_without_hint <= tracker_.size()) {
        continue;
      }
      return FromGrpcStatus(status);
    }
  }

  // `address` answered a call: the leader, worth naming when there was a choice (see
  // AnsweringLeader in job_client.h).
  void NoteAnswered(const std::string& address, bool redirected) {
    const bool named = (redirected || tracker_.size() > 1) && address != kGivenChannel;
    absl::MutexLock lock(&answered_mu_);
    answering_leader_ = named ? address : "";
  }

  // One unary call to `address` with deadline = now + call_timeout + extra (the server-side
  // wait). `*leader`: the leader a standby named in the trailing metadata, "" when none.
  template <typename Request, typename Response>
  grpc::Status CallOnce(const std::string& address, Method<Request, Response> method,
                        const Request& request, absl::Duration extra, Response* response,
                        std::string* leader) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(options_.call_timeout + extra));
    if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
    grpc::Status status = (StubFor(address)->*method)(&context, request, response);
    if (!status.ok()) {
      const auto& trailers = context.GetServerTrailingMetadata();
      if (auto hint = trailers.find(kLeaderMetadataKey); hint != trailers.end()) {
        leader->assign(hint->second.data(), hint->second.size());
      }
    }
    return status;
  }

  // Whether a connection to `address` is up, or comes up within the call timeout (at most
  // kConnectTimeout).
  bool Reachable(const std::string& address) {
    StubFor(address);
    std::shared_ptr<grpc::Channel> channel;
    {
      absl::MutexLock lock(&stubs_mu_);
      channel = channels_[address];
    }
    if (channel == nullptr) return true;  // the given channel: nothing to choose from
    const absl::Duration wait = std::min(options_.call_timeout, kConnectTimeout);
    return channel->WaitForConnected(std::chrono::system_clock::now() +
                                     absl::ToChronoMilliseconds(wait));
  }

  // The stub of `address`, its channel created on first use; stubs live as long as this.
  v1::JobService::Stub* StubFor(const std::string& address) {
    absl::MutexLock lock(&stubs_mu_);
    std::unique_ptr<v1::JobService::Stub>& stub = stubs_[address];
    if (stub == nullptr) {
      std::shared_ptr<grpc::ChannelCredentials> credentials =
          options_.credentials != nullptr ? options_.credentials
                                          : grpc::InsecureChannelCredentials();
      // Answers can be large (a long job's metrics, every job's status): up to 256 MiB.
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(256 << 20);
      std::shared_ptr<grpc::Channel> channel =
          grpc::CreateCustomChannel(address, credentials, args);
      channels_[address] = channel;
      stub = v1::JobService::NewStub(std::move(channel));
    }
    return stub.get();
  }

  const GrpcJobClientOptions options_;
  LeaderTracker tracker_;
  absl::Mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<v1::JobService::Stub>> stubs_ ABSL_GUARDED_BY(stubs_mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(stubs_mu_);
  mutable absl::Mutex answered_mu_;
  std::string answering_leader_ ABSL_GUARDED_BY(answered_mu_);
};

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::unique_ptr<JobClient> NewGrpcJobClient(const std::string& address,
                                            const GrpcJobClientOptions& options) {
  absl::StatusOr<std::vector<std::string>> addresses = ParseCoordinatorAddresses(address);
  if (!addresses.ok()) addresses = std::vector<std::string>{address};
  return std::make_unique<GrpcJobClient>(*std::move(addresses), options);
}

std::unique_ptr<JobClient> NewGrpcJobClient(std::shared_ptr<grpc::Channel> channel,
                                            const GrpcJobClientOptions& options) {
  return std::make_unique<GrpcJobClient>(std::move(channel), options);
}

}  // namespace ringleader
