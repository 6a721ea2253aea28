#include "coordinator/pipelined_heartbeats.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

struct PipelinedHeartbeats::Stream {
  size_t worker = 0;
  grpc::ClientContext context;
  std::unique_ptr<
      grpc::ClientAsyncReaderWriter<v1::HeartbeatStreamRequest, v1::HeartbeatStreamResponse>>
      call;
  v1::HeartbeatStreamRequest request;
  v1::HeartbeatStreamResponse response;
  // Tags: this + 0 (start / write) and this + 1 (read), as void*.
  void* write_tag() { return static_cast<void*>(this); }
  void* read_tag() { return static_cast<void*>(reinterpret_cast<char*>(this) + 1); }
};

struct PipelinedHeartbeats::Lane {
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<Stream>> streams;
  bool opened = false;
  int pending = 0;  // operations queued and not yet returned
};

PipelinedHeartbeats::PipelinedHeartbeats(std::vector<v1::WorkerService::Stub*> stubs,
                                         std::vector<v1::HeartbeatRequest> beats, int threads,
                                         absl::Duration timeout)
    : stubs_(std::move(stubs)), beats_(std::move(beats)), timeout_(timeout) {
  for (int t = 0; t < threads; ++t) {
    auto lane = std::make_unique<Lane>();
    for (size_t w = static_cast<size_t>(t); w < stubs_.size(); w += threads) {
      auto stream = std::make_unique<Stream>();
      stream->worker = w;
      *stream->request.mutable_beat() = beats_[w];
      lane->streams.push_back(std::move(stream));
    }
    lanes_.push_back(std::move(lane));
  }
}

PipelinedHeartbeats::~PipelinedHeartbeats() {
  for (auto& lane : lanes_) {
    if (!lane->opened) continue;
    for (auto& stream : lane->streams) stream->context.TryCancel();
    void* tag = nullptr;
    bool ok = false;
    while (lane->pending > 0 && lane->queue.Next(&tag, &ok)) --lane->pending;
    std::vector<grpc::Status> statuses(lane->streams.size());
    for (size_t i = 0; i < lane->streams.size(); ++i) {
      lane->streams[i]->call->Finish(&statuses[i], lane->streams[i]->write_tag());
    }
    for (size_t i = 0; i < lane->streams.size(); ++i) lane->queue.Next(&tag, &ok);
    lane->queue.Shutdown();
    while (lane->queue.Next(&tag, &ok)) {
    }
  }
}

absl::StatusOr<uint64_t> PipelinedHeartbeats::Round(int t) {
  Lane& lane = *lanes_[static_cast<size_t>(t)];
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_);
  auto await = [&](int count, const char* what) -> absl::Status {
    for (int i = 0; i < count; ++i) {
      void* tag = nullptr;
      bool ok = false;
      if (lane.queue.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) {
        return absl::DeadlineExceededError(absl::StrCat(what, ": no answer in time"));
      }
      --lane.pending;
      if (!ok) return absl::UnavailableError(absl::StrCat(what, ": a heartbeat stream broke"));
    }
    return absl::OkStatus();
  };
  if (!lane.opened) {
    lane.opened = true;
    for (auto& stream : lane.streams) {
      stream->call = stubs_[stream->worker]->PrepareAsyncHeartbeatStream(&stream->context,
                                                                         &lane.queue);
      stream->call->StartCall(stream->write_tag());
      ++lane.pending;
    }
    if (absl::Status started = await(static_cast<int>(lane.streams.size()), "opening");
        !started.ok()) {
      return started;
    }
  }
  for (auto& stream : lane.streams) {
    stream->call->Write(stream->request, stream->write_tag());
    stream->call->Read(&stream->response, stream->read_tag());
    lane.pending += 2;
  }
  if (absl::Status answered = await(2 * static_cast<int>(lane.streams.size()), "beating");
      !answered.ok()) {
    return answered;
  }
  for (auto& stream : lane.streams) {
    if (stream->response.beat().abort_size() != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", stream->worker, " was told to abort"));
    }
  }
  return lane.streams.size();
}

absl::StatusOr<uint64_t> PipelinedHeartbeats::UnaryRound(int t) {
  Lane& lane = *lanes_[static_cast<size_t>(t)];
  grpc::CompletionQueue queue;  // the lane's own queue belongs to its streams
  const size_t count = lane.streams.size();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::HeartbeatResponse> responses(count);
  std::vector<grpc::Status> statuses(count);
  std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<v1::HeartbeatResponse>>> calls;
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_);
  for (size_t i = 0; i < count; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(deadline);
    const size_t w = lane.streams[i]->worker;
    calls.push_back(stubs_[w]->AsyncHeartbeat(contexts.back().get(), beats_[w], &queue));
    calls.back()->Finish(&responses[i], &statuses[i], reinterpret_cast<void*>(i));
  }
  for (size_t i = 0; i < count; ++i) {
    void* tag = nullptr;
    bool ok = false;
    queue.Next(&tag, &ok);  // every call has a deadline, so each returns
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  for (size_t i = 0; i < count; ++i) {
    if (!statuses[i].ok()) {
      return absl::UnavailableError(absl::StrCat("unary heartbeat of worker ",
                                                 lane.streams[i]->worker, ": ",
                                                 statuses[i].error_message()));
    }
  }
  return count;
}

}  // namespace ringleader
