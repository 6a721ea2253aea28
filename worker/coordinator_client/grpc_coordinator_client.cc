// gRPC adapter of CoordinatorClient. All conversion and retry policy lives here; the daemon and
// the rank process never see grpc types.
#include "worker/coordinator_client/grpc_coordinator_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace ringleader {

absl::Status FromGrpcStatus(const grpc::Status& status, const char* rpc) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share the canonical numbering (0..16).
  const auto code = static_cast<absl::StatusCode>(static_cast<int>(status.error_code()));
  return absl::Status(code, absl::StrCat(rpc, ": ", status.error_message()));
}

namespace {

// Stands for the channel given to the constructor in the tracker (never a real address: it has
// no port).
constexpr char kGivenChannel[] = "(the given channel)";

// How many times one call follows a standby's hint at once before such hops count as attempts.
constexpr int kMaxImmediateRedirects = 4;

}  // namespace

std::unique_ptr<GrpcCoordinatorClient> GrpcCoordinatorClient::Create(
    const std::string& address, GrpcCoordinatorClientOptions options) {
  absl::StatusOr<std::vector<std::string>> addresses = ParseCoordinatorAddresses(address);
  if (!addresses.ok()) addresses = std::vector<std::string>{address};
  return std::make_unique<GrpcCoordinatorClient>(*std::move(addresses), std::move(options));
}

GrpcCoordinatorClient::GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                                             GrpcCoordinatorClientOptions options)
    : options_(std::move(options)), tracker_({kGivenChannel}) {
  absl::MutexLock lock(&stubs_mu_);
  stubs_[kGivenChannel] = v1::WorkerService::NewStub(std::move(channel));
}

namespace {

// With several coordinators, a failover (the leader's lease running out, then a standby
// starting) is a few seconds in which calls are refused at once: short waits between tries
// reach the new leader soon after it serves, and more tries span the failover.
GrpcCoordinatorClientOptions ForAList(GrpcCoordinatorClientOptions options, size_t addresses) {
  if (addresses < 2) return options;
  options.retry.max_backoff = std::min(options.retry.max_backoff, absl::Milliseconds(500));
  options.retry.max_attempts = std::max(options.retry.max_attempts, 16);
  return options;
}

}  // namespace

GrpcCoordinatorClient::GrpcCoordinatorClient(std::vector<std::string> addresses,
                                             GrpcCoordinatorClientOptions options)
    : options_(ForAList(std::move(options), addresses.size())), tracker_(std::move(addresses)) {}

GrpcCoordinatorClient::Stub* GrpcCoordinatorClient::StubFor(const std::string& address) {
  absl::MutexLock lock(&stubs_mu_);
  std::unique_ptr<Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
    grpc::ChannelArguments args;
    // Long polls sit idle on the wire for seconds; keep the connection alive across them.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
    stub = v1::WorkerService::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  }
  return stub.get();
}

GrpcCoordinatorClient::~GrpcCoordinatorClient() { CancelAll(); }

void GrpcCoordinatorClient::CancelAll() {
  if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  heartbeats_.Cancel();
  absl::MutexLock lock(&mu_);
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
}

absl::Duration GrpcCoordinatorClient::LongPollTimeout(uint32_t wait_timeout_ms) const {
  return absl::Milliseconds(wait_timeout_ms) + options_.long_poll_margin;
}

absl::Duration GrpcCoordinatorClient::NextBackoff(absl::Duration current) const {
  return std::min(current * options_.retry.multiplier, options_.retry.max_backoff);
}

void GrpcCoordinatorClient::BackoffWait(absl::Duration wait) {
  if (options_.retry.jitter > 0) {
    // Thread-compatible generator per call: retries are rare, construction cost does not matter.
    absl::BitGen gen;
    wait *= absl::Uniform(gen, 1.0 - options_.retry.jitter, 1.0 + options_.retry.jitter);
  }
  if (options_.backoff_wait) {
    options_.backoff_wait(wait);
  } else {
    cancelled_.WaitForNotificationWithTimeout(wait);
  }
}

namespace {

// "<job>/<generation>" of a request about an attempt; "" for the others (registration,
// heartbeats, assignments).
template <typename Request>
auto AttemptKeyOf(const Request& request, int)
    -> decltype(request.job_id(), request.generation(), std::string()) {
  return absl::StrCat(request.job_id(), "/", request.generation());
}
template <typename Request>
std::string AttemptKeyOf(const Request&, long) {
  return "";
}

}  // namespace

void GrpcCoordinatorClient::AddAttemptToken(const std::string& job_id, uint64_t generation,
                                            const std::string& token) {
  if (token.empty()) return;
  const std::string key = absl::StrCat(job_id, "/", generation);
  absl::MutexLock lock(&mu_);
  for (auto& [known, value] : attempt_tokens_) {
    if (known == key) {
      value = token;
      return;
    }
  }
  attempt_tokens_.emplace_back(key, token);
  if (attempt_tokens_.size() > 16) attempt_tokens_.pop_front();
}

template <typename Request, typename Response>
grpc::Status GrpcCoordinatorClient::CallOnce(const std::string& address,
                                             Method<Request, Response> method,
                                             const Request& request, absl::Duration timeout,
                                             Response* response, std::string* leader) {
  leader->clear();
  Stub* const stub = StubFor(address);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  const std::string attempt = AttemptKeyOf(request, 0);
  {
    absl::MutexLock lock(&mu_);
    if (!attempt.empty()) {
      for (const auto& [known, token] : attempt_tokens_) {
        if (known == attempt) context.AddMetadata("ringleader-attempt-token", token);
      }
    }
    // Checked under mu_: CancelAll notifies before it takes mu_, so a call registering after
    // CancelAll's sweep sees the notification here.
    if (cancelled_.HasBeenNotified()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client shut down");
    }
    in_flight_.insert(&context);
  }
  grpc::Status status = (stub->*method)(&context, request, response);
  {
    absl::MutexLock lock(&mu_);
    in_flight_.erase(&context);
  }
  if (status.error_code() == grpc::StatusCode::CANCELLED && !cancelled_.HasBeenNotified()) {
    // Not our cancel: the coordinator cancelled the call as it shut down or stepped down (a
    // standby now). Whether it ran is unknown, as with any UNAVAILABLE; the next call goes to
    // the leader.
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("the coordinator at ", address,
                                       " cancelled the call (shutting down or stepping down): ",
                                       status.error_message()));
  }
  if (!status.ok()) {
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto hint = trailers.find(kLeaderMetadataKey); hint != trailers.end()) {
      leader->assign(hint->second.data(), hint->second.size());
    }
  }
  return status;
}

template <typename Request, typename Response>
absl::StatusOr<Response> GrpcCoordinatorClient::Call(const char* rpc,
                                                     Method<Request, Response> method,
                                                     const Request& request, absl::Duration timeout,
                                                     bool idempotent) {
  const int attempts = idempotent ? std::max(1, options_.retry.max_attempts) : 1;
  absl::Duration backoff = options_.retry.initial_backoff;
  grpc::Status status;
  int redirects = 0;
  for (int attempt = 1;;) {
    Response response;
    const std::string address = tracker_.current();
    std::string leader;
    status = CallOnce(address, method, request, timeout, &response, &leader);
    if (status.ok()) return response;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      // No answer in time (long polls included: their deadline leaves the coordinator a
      // margin): not retried, but the next call tries a list's next address.
      tracker_.OnRefused(address, "");
      break;
    }
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || cancelled_.HasBeenNotified()) {
      break;
    }
    if (leader == address) leader.clear();  // not a standby's hint: the leader itself failed
    tracker_.OnRefused(address, leader);
    // A standby refused the call without executing it: the leader gets it at once.
    if (!leader.empty() && ++redirects <= kMaxImmediateRedirects) continue;
    if (attempt >= attempts) break;
    BackoffWait(backoff);
    backoff = NextBackoff(backoff);
    ++attempt;
  }
  return FromGrpcStatus(status, rpc);
}

absl::StatusOr<v1::RegisterWorkerResponse> GrpcCoordinatorClient::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  return Call("RegisterWorker", &Stub::RegisterWorker, request, options_.call_timeout, true);
}

absl::StatusOr<v1::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  if (options_.heartbeat_stream && !heartbeat_stream_unsupported_.load()) {
    v1::HeartbeatResponse response;
    const std::string address = tracker_.current();
    std::string leader;
    const grpc::Status beat = heartbeats_.Beat(request, options_.call_timeout, &response, &leader);
    // A standby refused the stream: the unary beat below goes to the leader it named.
    if (beat.error_code() == grpc::StatusCode::UNAVAILABLE && !leader.empty() &&
        leader != address) {
      tracker_.OnRefused(address, leader);
    }
    // No answer in time: a hung coordinator (stopped, overloaded, cut off) is as good as gone
    // for a list's next address; the next beat opens the stream there.
    if (beat.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) tracker_.OnRefused(address, "");
    switch (beat.error_code()) {
      case grpc::StatusCode::OK:
        return response;
      case grpc::StatusCode::UNIMPLEMENTED:  // an older coordinator: unary from now on
        heartbeat_stream_unsupported_ = true;
        break;
      case grpc::StatusCode::CANCELLED:
        if (cancelled_.HasBeenNotified()) return FromGrpcStatus(beat, "Heartbeat");
        break;  // the coordinator is shutting down: the unary call retries
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::INTERNAL:
      case grpc::StatusCode::UNKNOWN:
        break;  // the stream broke: this beat goes unary, with retries
      default:  // the coordinator's answer (NOT_FOUND), or none in time
        return FromGrpcStatus(beat, "Heartbeat");
    }
  }
  return Call("Heartbeat", &Stub::Heartbeat, request, options_.call_timeout, true);
}

absl::StatusOr<v1::WaitAssignmentResponse> GrpcCoordinatorClient::WaitAssignment(
    const v1::WaitAssignmentRequest& request) {
  return Call("WaitAssignment", &Stub::WaitAssignment, request,
              LongPollTimeout(request.wait_timeout_ms()), true);
}

absl::StatusOr<v1::JoinJobResponse> GrpcCoordinatorClient::JoinJob(
    const v1::JoinJobRequest& request) {
  return Call("JoinJob", &Stub::JoinJob, request, options_.call_timeout, true);
}

absl::StatusOr<v1::KvSetResponse> GrpcCoordinatorClient::KvSet(const v1::KvSetRequest& request) {
  return Call("KvSet", &Stub::KvSet, request, options_.call_timeout, true);
}

absl::StatusOr<v1::KvGetResponse> GrpcCoordinatorClient::KvGet(const v1::KvGetRequest& request) {
  return Call("KvGet", &Stub::KvGet, request, LongPollTimeout(request.wait_timeout_ms()), true);
}

absl::StatusOr<v1::KvGetManyResponse> GrpcCoordinatorClient::KvGetMany(
    const v1::KvGetManyRequest& request) {
  return Call("KvGetMany", &Stub::KvGetMany, request, LongPollTimeout(request.wait_timeout_ms()),
              true);
}

absl::StatusOr<v1::ReportProgressResponse> GrpcCoordinatorClient::ReportProgress(
    const v1::ReportProgressRequest& request) {
  return Call("ReportProgress", &Stub::ReportProgress, request, options_.call_timeout, false);
}

absl::StatusOr<v1::FinishRankResponse> GrpcCoordinatorClient::FinishRank(
    const v1::FinishRankRequest& request) {
  return Call("FinishRank", &Stub::FinishRank, request, options_.call_timeout, true);
}

absl::StatusOr<v1::AppendLogsResponse> GrpcCoordinatorClient::AppendLogs(
    const v1::AppendLogsRequest& request) {
  return Call("AppendLogs", &Stub::AppendLogs, request, options_.call_timeout, false);
}

}  // namespace ringleader
