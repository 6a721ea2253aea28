#include "coordinator/rpc/heartbeat_streams.h"

#include "coordinator/rpc/grpc_status.h"

namespace ringleader {

// One open stream. Reads and writes alternate, so at most one operation is pending and every
// path that ends it (a failed read or write, a failed beat) calls Finish exactly once.
class HeartbeatStreams::Stream final : public HeartbeatStreams::Reactor {
 public:
  Stream(HeartbeatStreams* owner, grpc::CallbackServerContext* context)
      : owner_(owner), context_(context) {}

  grpc::CallbackServerContext* context() const { return context_; }

  void Start() { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (OK) or the call was cancelled (the status is then ignored).
      Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    const absl::Status beat =
        owner_->handler_->Heartbeat(request_.beat(), response_.mutable_beat());
    if (!beat.ok()) {
      Finish(ToGrpcStatus(beat));
      return;
    }
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "heartbeat answer not delivered"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override {
    owner_->Remove(this);
    delete this;
  }

 private:
  HeartbeatStreams* const owner_;
  grpc::CallbackServerContext* const context_;
  v1::HeartbeatStreamRequest request_;
  v1::HeartbeatStreamResponse response_;
};

// A stream refused at once (the server is shutting down).
class RefusedHeartbeatStream final : public HeartbeatStreams::Reactor {
 public:
  RefusedHeartbeatStream() {
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the coordinator is shutting down; heartbeat again when it is back"));
  }
  void OnDone() override { delete this; }
};

HeartbeatStreams::Reactor* HeartbeatStreams::Open(grpc::CallbackServerContext* context) {
  Stream* stream = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return new RefusedHeartbeatStream();
    stream = new Stream(this, context);
    open_.insert(stream);
  }
  stream->Start();
  return stream;
}

void HeartbeatStreams::CloseAll() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  // Under mu_: a stream leaves open_ (OnDone, which takes mu_) before its context is freed.
  // TryCancel only schedules the pending operation's failure; it calls no reaction inline.
  for (Stream* stream : open_) stream->context()->TryCancel();
}

size_t HeartbeatStreams::open_streams() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

void HeartbeatStreams::Remove(Stream* stream) {
  absl::MutexLock lock(&mu_);
  open_.erase(stream);
}

}  // namespace ringleader
