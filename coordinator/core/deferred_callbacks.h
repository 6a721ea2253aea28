// Callbacks collected while a mutex is held and run after it is released.
//
//   DeferredCallbacks deferred;          // declared BEFORE the lock ...
//   absl::MutexLock lock(&mu_);          // ... so the lock is released first,
//   deferred.Add([done] { done(42); });  // and the callbacks run on scope exit.
//
// Completion callbacks of long polls may call back into their owner (or block briefly on
// gRPC's machinery): running them under the owner's lock would deadlock or stall everyone.
#ifndef RINGLEADER_COORDINATOR_CORE_DEFERRED_CALLBACKS_H_
#define RINGLEADER_COORDINATOR_CORE_DEFERRED_CALLBACKS_H_

#include <functional>
#include <utility>
#include <vector>

namespace ringleader {

// Not thread-safe: one instance per call, owned by the calling thread.
class DeferredCallbacks {
 public:
  DeferredCallbacks() = default;
  DeferredCallbacks(const DeferredCallbacks&) = delete;
  DeferredCallbacks& operator=(const DeferredCallbacks&) = delete;
  ~DeferredCallbacks() { RunAll(); }

  void Add(std::function<void()> callback) { callbacks_.push_back(std::move(callback)); }

  // Runs the collected callbacks in the order they were added. Callbacks added while running
  // run too.
  void RunAll() {
    while (!callbacks_.empty()) {
      std::vector<std::function<void()>> batch;
      batch.swap(callbacks_);
      for (auto& callback : batch) callback();
    }
  }

 private:
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_CORE_DEFERRED_CALLBACKS_H_
