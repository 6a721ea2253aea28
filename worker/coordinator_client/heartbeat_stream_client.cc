#include "worker/coordinator_client/heartbeat_stream_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coordinator_addresses.h"

namespace ringleader {
namespace {

// Completion-queue tags: the operation's kind; at most one of each is pending.
void* const kStartTag = reinterpret_cast<void*>(1);
void* const kWriteTag = reinterpret_cast<void*>(2);
void* const kReadTag = reinterpret_cast<void*>(3);
void* const kFinishTag = reinterpret_cast<void*>(4);

}  // namespace

struct HeartbeatStreamClient::Call {
  grpc::ClientContext context;
  grpc::CompletionQueue queue;
  std::unique_ptr<
      grpc::ClientAsyncReaderWriter<v1::HeartbeatStreamRequest, v1::HeartbeatStreamResponse>>
      stream;
  v1::HeartbeatStreamRequest request;
  v1::HeartbeatStreamResponse response;
};

HeartbeatStreamClient::HeartbeatStreamClient(v1::WorkerService::Stub* stub)
    : stub_([stub] { return stub; }) {}

HeartbeatStreamClient::HeartbeatStreamClient(std::function<v1::WorkerService::Stub*()> stub)
    : stub_(std::move(stub)) {}

HeartbeatStreamClient::~HeartbeatStreamClient() {
  absl::MutexLock lock(&beat_mu_);
  if (call_ != nullptr) CloseLocked(0, /*cancel=*/true);
}

void HeartbeatStreamClient::Cancel() {
  absl::MutexLock lock(&cancel_mu_);
  cancelled_ = true;
  if (open_context_ != nullptr) open_context_->TryCancel();
}

bool HeartbeatStreamClient::AwaitLocked(int* pending, absl::Time deadline, bool* all_ok) {
  const auto until = absl::ToChronoTime(deadline);
  while (*pending > 0) {
    void* tag = nullptr;
    bool ok = false;
    switch (call_->queue.AsyncNext(&tag, &ok, until)) {
      case grpc::CompletionQueue::GOT_EVENT:
        --*pending;
        if (!ok) *all_ok = false;
        break;
      case grpc::CompletionQueue::TIMEOUT:
        return false;
      case grpc::CompletionQueue::SHUTDOWN:  // never shut down while a call is open
        *all_ok = false;
        return true;
    }
  }
  return true;
}

grpc::Status HeartbeatStreamClient::CloseLocked(int pending, bool cancel) {
  {
    absl::MutexLock lock(&cancel_mu_);
    open_context_ = nullptr;
  }
  if (cancel) call_->context.TryCancel();
  // Cancelled operations complete at once; without a cancel every pending one has completed
  // already (a failed read ends them).
  bool ignored = true;
  AwaitLocked(&pending, absl::InfiniteFuture(), &ignored);
  grpc::Status status;
  call_->stream->Finish(&status, kFinishTag);
  int finishing = 1;
  AwaitLocked(&finishing, absl::InfiniteFuture(), &ignored);
  const auto& trailers = call_->context.GetServerTrailingMetadata();
  if (auto leader = trailers.find(kLeaderMetadataKey); leader != trailers.end()) {
    closed_leader_.assign(leader->second.data(), leader->second.size());
  }
  call_->queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (call_->queue.Next(&tag, &ok)) {
  }
  call_.reset();
  return status;
}

grpc::Status HeartbeatStreamClient::OpenLocked(absl::Time deadline) {
  call_ = std::make_unique<Call>();
  {
    absl::MutexLock lock(&cancel_mu_);
    if (cancelled_) {
      call_.reset();
      return grpc::Status(grpc::StatusCode::CANCELLED, "client shut down");
    }
    open_context_ = &call_->context;
  }
  call_->stream = stub_()->PrepareAsyncHeartbeatStream(&call_->context, &call_->queue);
  call_->stream->StartCall(kStartTag);
  bool ok = true;
  int pending = 1;
  if (!AwaitLocked(&pending, deadline, &ok)) {
    CloseLocked(pending, /*cancel=*/true);
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the heartbeat stream did not open in time");
  }
  if (!ok) return CloseLocked(0, /*cancel=*/true);
  return grpc::Status::OK;
}

grpc::Status HeartbeatStreamClient::Beat(const v1::HeartbeatRequest& request,
                                         absl::Duration timeout, v1::HeartbeatResponse* response,
                                         std::string* leader) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&beat_mu_);
  closed_leader_.clear();
  grpc::Status status = BeatLocked(request, deadline, timeout, response);
  if (leader != nullptr) *leader = status.ok() ? "" : closed_leader_;
  return status;
}

grpc::Status HeartbeatStreamClient::BeatLocked(const v1::HeartbeatRequest& request,
                                               absl::Time deadline, absl::Duration timeout,
                                               v1::HeartbeatResponse* response) {
  if (call_ == nullptr) {
    grpc::Status opened = OpenLocked(deadline);
    if (!opened.ok()) return opened;
  }
  *call_->request.mutable_beat() = request;
  call_->response.Clear();
  call_->stream->Write(call_->request, kWriteTag);
  call_->stream->Read(&call_->response, kReadTag);
  bool ok = true;
  int pending = 2;
  if (!AwaitLocked(&pending, deadline, &ok)) {
    // The write, the read or both are still pending: the answer is late.
    CloseLocked(pending, /*cancel=*/true);
    {
      absl::MutexLock cancel_lock(&cancel_mu_);
      if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "client shut down");
    }
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("no answer on the heartbeat stream within ",
                                     absl::FormatDuration(timeout)));
  }
  if (ok) {
    *response = std::move(*call_->response.mutable_beat());
    return grpc::Status::OK;
  }
  // The stream ended: the coordinator refused the beat, cancelled the stream or went away.
  grpc::Status status = CloseLocked(0, /*cancel=*/false);
  if (status.ok()) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the coordinator closed the heartbeat stream");
  }
  {
    absl::MutexLock cancel_lock(&cancel_mu_);
    if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "client shut down");
  }
  return status;
}

}  // namespace ringleader
