// Test helpers for the sync package: a single-rank fake Collective that records what it was
// asked to do (and its form over guarded memory), synthetic parameters and gradients, and gloo ranks as threads with a watchdog.
#ifndef RINGLEADER_WORKER_SYNC_SYNC_TEST_UTIL_H_
#define RINGLEADER_WORKER_SYNC_SYNC_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/sync/recording_tensor_memory.h"
#include "worker/trainer/parameter.h"

namespace ringleader {
namespace sync_test {

// A world-size-1 Collective: AllReduce/Broadcast leave the data as is (the average of one rank),
// AllGather copies. Every operation completes at once, reports `op_duration`, and is logged.
// Thread-safe.
class FakeCollective : public Collective {
 public:
  struct Call {
    std::string kind;  // "allreduce", "broadcast", "allgather", "reducescatter", "barrier"
    size_t count = 0;
    DataType dtype = DataType::kFloat32;
    int bucket = -1;
  };

  explicit FakeCollective(std::string backend = "fake", MemoryKind memory = MemoryKind::kHost,
                          absl::Duration op_duration = absl::Milliseconds(5))
      : backend_(std::move(backend)), memory_(memory), op_duration_(op_duration) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return backend_; }
  MemoryKind memory_kind() const override { return memory_; }

  std::shared_ptr<Work> AllReduce(TensorView buf, ReduceOp op,
                                  const CollectiveOptions& opts) override;
  std::shared_ptr<Work> Broadcast(TensorView buf, int root, const CollectiveOptions& opts) override;
  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override;
  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts) override;
  std::shared_ptr<Work> Barrier(const CollectiveOptions& opts) override;
  void Abort(const absl::Status& reason) override {}
  absl::Status Close(absl::Duration) override { return absl::OkStatus(); }

  std::vector<Call> calls() const;

 private:
  std::shared_ptr<Work> Log(const char* kind, size_t count, DataType dtype, int bucket);

  const std::string backend_;
  const MemoryKind memory_;
  const absl::Duration op_duration_;
  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
};

// FakeCollective over guarded device memory (RecordingTensorMemory with `guard`): a device-kind
// "nccl" collective whose only data movement (the all-gather's and the reduce-scatter's copies)
// runs inside the memory's WithAccess, so every other access to the pool crashes the test.
class GuardedFakeCollective : public FakeCollective {
 public:
  explicit GuardedFakeCollective(RecordingTensorMemory* memory)
      : FakeCollective("nccl", MemoryKind::kDevice), memory_(memory) {}
  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override;
  std::shared_ptr<Work> ReduceScatter(TensorView in, TensorView out, ReduceOp op,
                                      const CollectiveOptions& opts) override;

 private:
  RecordingTensorMemory* memory_;
};

// `n` parameters "p<i>.weight" with mixed sizes in [1, max_count], reproducible from `seed`.
std::vector<ParameterInfo> MixedParams(size_t n, size_t max_count, uint64_t seed);

// A reproducible pseudo-random gradient value in [-1, 1] scaled by a per-parameter magnitude
// (1e-3 .. 10), distinct for every (rank, step, param, element).
float TestGradient(int rank, int64_t step, size_t param, size_t element);

// Rendezvouses `world_size` gloo ranks over loopback (collective timeout `collective_timeout`,
// 2 communication threads); aborts the test binary if that fails.
std::vector<std::unique_ptr<Collective>> MakeGlooRanks(
    int world_size, absl::Duration collective_timeout = absl::Seconds(10));

// Runs fn(rank) on one thread per rank; aborts the process (failing the test) if they have not
// all returned within `limit`.
void RunRanks(int world_size, const std::function<void(int rank)>& fn,
              absl::Duration limit = absl::Seconds(25));

}  // namespace sync_test
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_SYNC_SYNC_TEST_UTIL_H_
