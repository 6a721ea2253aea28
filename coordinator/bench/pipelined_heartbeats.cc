#include "coordinator/bench/pipelined_heartbeats.h"

#include <chrono>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {
namespace {

// A tag is the worker's address plus the operation (the low bits of an aligned pointer).
enum Op : uintptr_t { kStart = 0, kWrite = 1, kRead = 2, kUnary = 3 };

}  // namespace

struct PipelinedHeartbeats::Worker {
  size_t index = 0;
  // Streamed.
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<
      grpc::ClientAsyncReaderWriter<v1::HeartbeatStreamRequest, v1::HeartbeatStreamResponse>>
      stream;
  v1::HeartbeatStreamRequest request;
  v1::HeartbeatStreamResponse response;
  bool write_pending = false;
  bool read_pending = false;
  // Unary.
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::HeartbeatResponse>> call;
  v1::HeartbeatResponse unary_response;
  grpc::Status unary_status;
  bool unary_pending = false;

  void* tag(Op op) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(this) | op); }
  bool pending() const { return write_pending || read_pending || unary_pending; }
};

struct PipelinedHeartbeats::Lane {
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<Worker>> workers;
  bool started = false;
};

PipelinedHeartbeats::PipelinedHeartbeats(Mode mode, std::vector<v1::WorkerService::Stub*> stubs,
                                         std::vector<v1::HeartbeatRequest> beats, int threads,
                                         absl::Duration timeout)
    : mode_(mode), stubs_(std::move(stubs)), beats_(std::move(beats)), timeout_(timeout) {
  for (int t = 0; t < threads; ++t) {
    auto lane = std::make_unique<Lane>();
    for (size_t w = static_cast<size_t>(t); w < stubs_.size(); w += threads) {
      auto worker = std::make_unique<Worker>();
      worker->index = w;
      *worker->request.mutable_beat() = beats_[w];
      lane->workers.push_back(std::move(worker));
    }
    lanes_.push_back(std::move(lane));
  }
}

PipelinedHeartbeats::~PipelinedHeartbeats() {
  for (auto& lane : lanes_) {
    if (!lane->started) continue;
    int pending = 0;
    for (auto& worker : lane->workers) {
      if (worker->context != nullptr) worker->context->TryCancel();
      pending += worker->write_pending + worker->read_pending + worker->unary_pending;
    }
    void* tag = nullptr;
    bool ok = false;
    for (; pending > 0 && lane->queue.Next(&tag, &ok); --pending) {
    }
    if (mode_ == Mode::kStreamed) {
      std::vector<grpc::Status> statuses(lane->workers.size());
      for (size_t i = 0; i < lane->workers.size(); ++i) {
        lane->workers[i]->stream->Finish(&statuses[i], lane->workers[i]->tag(kStart));
      }
      for (size_t i = 0; i < lane->workers.size(); ++i) lane->queue.Next(&tag, &ok);
    }
    lane->queue.Shutdown();
    while (lane->queue.Next(&tag, &ok)) {
    }
  }
}

absl::Status PipelinedHeartbeats::Send(Lane& lane, Worker& worker) {
  if (mode_ == Mode::kStreamed) {
    worker.response.Clear();
    worker.stream->Write(worker.request, worker.tag(kWrite));
    worker.stream->Read(&worker.response, worker.tag(kRead));
    worker.write_pending = worker.read_pending = true;
    return absl::OkStatus();
  }
  worker.context = std::make_unique<grpc::ClientContext>();
  worker.context->set_deadline(std::chrono::system_clock::now() +
                               absl::ToChronoMilliseconds(timeout_));
  worker.call = stubs_[worker.index]->AsyncHeartbeat(worker.context.get(), beats_[worker.index],
                                                     &lane.queue);
  worker.call->Finish(&worker.unary_response, &worker.unary_status, worker.tag(kUnary));
  worker.unary_pending = true;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PipelinedHeartbeats::Beats(int t, uint64_t answers) {
  Lane& lane = *lanes_[static_cast<size_t>(t)];
  if (lane.workers.empty()) return 0;
  if (!lane.started) {
    lane.started = true;
    for (auto& worker : lane.workers) {
      if (mode_ == Mode::kStreamed) {
        worker->context = std::make_unique<grpc::ClientContext>();
        worker->stream = stubs_[worker->index]->PrepareAsyncHeartbeatStream(
            worker->context.get(), &lane.queue);
        worker->stream->StartCall(worker->tag(kStart));
        worker->write_pending = true;  // the start counts as the pending write
      } else {
        if (absl::Status sent = Send(lane, *worker); !sent.ok()) return sent;
      }
    }
  }
  uint64_t answered = 0;
  while (answered < answers) {
    void* tag = nullptr;
    bool ok = false;
    const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_);
    if (lane.queue.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) {
      return absl::DeadlineExceededError("pipelined heartbeats: no answer in time");
    }
    const auto bits = reinterpret_cast<uintptr_t>(tag);
    Worker& worker = *reinterpret_cast<Worker*>(bits & ~uintptr_t{3});
    const Op op = static_cast<Op>(bits & 3);
    if (!ok) {
      return absl::UnavailableError(
          absl::StrCat("pipelined heartbeats: worker ", worker.index, "'s beat failed"));
    }
    switch (op) {
      case kStart:
        worker.write_pending = false;
        break;
      case kWrite:
        worker.write_pending = false;
        break;
      case kRead:
        worker.read_pending = false;
        if (worker.response.beat().abort_size() != 0) {
          return absl::FailedPreconditionError(
              absl::StrCat("worker ", worker.index, " was told to abort"));
        }
        ++answered;
        break;
      case kUnary:
        worker.unary_pending = false;
        if (!worker.unary_status.ok()) {
          return absl::UnavailableError(absl::StrCat("unary heartbeat of worker ", worker.index,
                                                     ": ", worker.unary_status.error_message()));
        }
        ++answered;
        break;
    }
    // The next beat goes out once the previous one is answered (and, streamed, its write done).
    if (!worker.pending()) {
      if (absl::Status sent = Send(lane, worker); !sent.ok()) return sent;
    }
  }
  return answered;
}

}  // namespace ringleader
