#include "worker/sync/sync_test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"

namespace ringleader {
namespace sync_test {
namespace {

class DoneWork : public Work {
 public:
  explicit DoneWork(absl::Duration d) : d_(d) {}
  absl::Status Wait() override { return absl::OkStatus(); }
  bool IsDone() const override { return true; }
  absl::Duration Duration() const override { return d_; }

 private:
  absl::Duration d_;
};

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::shared_ptr<Work> FakeCollective::Log(const char* kind, size_t count, DataType dtype,
                                          int bucket) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(Call{kind, count, dtype, bucket});
  return std::make_shared<DoneWork>(op_duration_);
}

std::shared_ptr<Work> FakeCollective::AllReduce(TensorView buf, ReduceOp,
                                                const CollectiveOptions& opts) {
  return Log("allreduce", buf.count, buf.dtype, opts.bucket);
}

std::shared_ptr<Work> FakeCollective::Broadcast(TensorView buf, int,
                                                const CollectiveOptions& opts) {
  return Log("broadcast", buf.count, buf.dtype, opts.bucket);
}

std::shared_ptr<Work> FakeCollective::AllGather(TensorView in, TensorView out,
                                                const CollectiveOptions& opts) {
  std::memcpy(out.data, in.data, in.bytes());
  return Log("allgather", in.count, in.dtype, opts.bucket);
}

std::shared_ptr<Work> FakeCollective::ReduceScatter(TensorView in, TensorView out, ReduceOp,
                                                    const CollectiveOptions& opts) {
  std::memcpy(out.data, in.data, out.bytes());
  return Log("reducescatter", in.count, in.dtype, opts.bucket);
}

std::shared_ptr<Work> FakeCollective::Barrier(const CollectiveOptions& opts) {
  return Log("barrier", 0, DataType::kUInt8, opts.bucket);
}

std::shared_ptr<Work> GuardedFakeCollective::AllGather(TensorView in, TensorView out,
                                                       const CollectiveOptions& opts) {
  std::shared_ptr<Work> work;
  memory_->WithAccess([&] { work = FakeCollective::AllGather(in, out, opts); });
  return work;
}

std::shared_ptr<Work> GuardedFakeCollective::ReduceScatter(TensorView in, TensorView out,
                                                           ReduceOp op,
                                                           const CollectiveOptions& opts) {
  std::shared_ptr<Work> work;
  memory_->WithAccess([&] { work = FakeCollective::ReduceScatter(in, out, op, opts); });
  return work;
}

std::vector<FakeCollective::Call> FakeCollective::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

std::vector<ParameterInfo> MixedParams(size_t n, size_t max_count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ParameterInfo> params;
  for (size_t i = 0; i < n; ++i) {
    ParameterInfo p;
    p.name = absl::StrCat("p", i, i % 2 == 0 ? ".weight" : ".bias");
    p.count = 1 + rng() % max_count;
    p.shape = {p.count};
    params.push_back(p);
  }
  return params;
}

float TestGradient(int rank, int64_t step, size_t param, size_t element) {
  const uint64_t h = Mix(Mix(Mix(Mix(static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(step)) ^
                             param) ^
                         element);
  const double unit = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);  // [0,1)
  const double magnitude = std::pow(10.0, static_cast<double>(param % 5) - 3.0);  // 1e-3..10
  return static_cast<float>((2 * unit - 1) * magnitude);
}

std::vector<std::unique_ptr<Collective>> MakeGlooRanks(int world_size,
                                                       absl::Duration collective_timeout) {
  GlooOptions opts;
  opts.collective_timeout = collective_timeout;
  opts.rendezvous_timeout = absl::Seconds(20);
  opts.comm_threads = 2;
  auto results = testing_util::CreateGlooRanks(world_size, opts);
  std::vector<std::unique_ptr<Collective>> ranks;
  for (auto& r : results) {
    if (!r.ok()) {
      std::fprintf(stderr, "gloo rendezvous failed: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    ranks.push_back(std::move(*r));
  }
  return ranks;
}

void RunRanks(int world_size, const std::function<void(int rank)>& fn, absl::Duration limit) {
  testing_util::Watchdog watchdog(limit, absl::StrCat(world_size, " ranks"));
  testing_util::ForEachRankInParallel(world_size, fn);
}

}  // namespace sync_test
}  // namespace ringleader
