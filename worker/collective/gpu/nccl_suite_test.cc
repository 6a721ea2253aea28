// The NCCL suite: the NCCL backend across the GPUs present (one rank per GPU, ranks as threads),
// and data-parallel GPU training over it. Every test starts with RL_SKIP_WITHOUT_GPU, so on a
// machine without a GPU the whole suite skips with "no GPU: <reason>" (and fails under
// RL_REQUIRE_GPU=1). Run on a GPU node:
//   bazel test --config=gpu //worker/collective/gpu:nccl_suite_test
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/bf16.h"
#include "common/gpu/gpu_test_util.h"
#include "common/ulp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/collective/gpu/nccl_collective.h"
#include "worker/collective/gpu/nccl_suite_options.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/rank_threads.h"
#include "worker/data/dataset.h"
#include "worker/trainer/gpu/gpu_mlp.h"
#include "worker/trainer/gpu/gpu_sgd.h"
#include "worker/trainer/gpu/gpu_suite_util.h"
#include "worker/trainer/gpu_tolerances.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/norm.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::HasSubstr;

// --- NCCL across the GPUs present: one rank per GPU, ranks as threads. ---

struct RankResources {
  cudaStream_t compute = nullptr;
  std::unique_ptr<Collective> collective;
};

TEST(GpuSuite, NcclCollectivesAcrossAllGpus) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  auto store = std::make_shared<InMemoryKeyValueStore>();
  constexpr size_t kCount = 1000;
  std::vector<std::string> failures(n);
  RunRanks(
      n,
      [&](int r) {
        auto fail = [&](const std::string& what) {
          if (failures[r].empty()) failures[r] = what;
        };
        if (cudaSetDevice(r) != cudaSuccess) return fail("cudaSetDevice");
        cudaStream_t compute;
        cudaStreamCreate(&compute);
        auto c = CreateNcclCollective(store, "suite/all/", r, n, r, SuiteNcclOptions(compute));
        if (!c.ok()) return fail(c.status().ToString());
        Collective& coll = **c;
        // Fill through the compute stream and issue at once: the collective must wait for it.
        float* pinned;
        cudaMallocHost(&pinned, kCount * sizeof(float));
        std::fill(pinned, pinned + kCount, static_cast<float>(r + 1));
        DeviceBuffer<float> buf(kCount);
        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        absl::Status s =
            coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kSum)->Wait();
        if (!s.ok()) return fail(s.ToString());
        if (buf.ToHost() != std::vector<float>(kCount, n * (n + 1) / 2.0f)) fail("sum");

        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        s = coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kAvg)->Wait();
        // ncclAvg may scale by 1/n instead of dividing: for 5-7 ranks that rounds once
        // differently from (n+1)/2, so the average is checked within 1 ULP.
        if (!s.ok()) return fail("avg: " + s.ToString());
        for (float v : buf.ToHost()) {
          if (UlpDistance(v, (n + 1) / 2.0f) > 1) {
            fail(absl::StrCat("avg ", v, " is more than 1 ulp from ", (n + 1) / 2.0f));
            break;
          }
        }

        cudaMemcpyAsync(buf.get(), pinned, kCount * sizeof(float), cudaMemcpyHostToDevice, compute);
        s = coll.AllReduce({buf.get(), kCount, DataType::kFloat32}, ReduceOp::kMax)->Wait();
        if (!s.ok() || buf.ToHost() != std::vector<float>(kCount, static_cast<float>(n)))
          fail("max");

        DeviceBuffer<uint16_t> bf(std::vector<uint16_t>(kCount, FloatToBf16(r + 1.0f)));
        s = coll.AllReduce({bf.get(), kCount, DataType::kBFloat16}, ReduceOp::kSum)->Wait();
        if (!s.ok() ||
            bf.ToHost() != std::vector<uint16_t>(kCount, FloatToBf16(n * (n + 1) / 2.0f))) {
          fail("bf16 sum");
        }
        DeviceBuffer<uint8_t> flags(std::vector<uint8_t>(8, r == n - 1 ? 1 : 0));
        s = coll.AllReduce({flags.get(), 8, DataType::kUInt8}, ReduceOp::kMax)->Wait();
        if (!s.ok() || flags.ToHost() != std::vector<uint8_t>(8, 1)) fail("uint8 max");

        DeviceBuffer<float> mine(std::vector<float>(4, static_cast<float>(r)));
        s = coll.Broadcast({mine.get(), 4, DataType::kFloat32}, n - 1)->Wait();
        if (!s.ok() || mine.ToHost() != std::vector<float>(4, n - 1.0f)) fail("broadcast");

        DeviceBuffer<float> in(std::vector<float>(4, static_cast<float>(r)));
        DeviceBuffer<float> gathered(4 * n);
        s = coll.AllGather({in.get(), 4, DataType::kFloat32},
                           {gathered.get(), 4u * n, DataType::kFloat32})
                ->Wait();
        std::vector<float> expected_gather;
        for (int q = 0; q < n; ++q)
          expected_gather.insert(expected_gather.end(), 4, static_cast<float>(q));
        if (!s.ok() || gathered.ToHost() != expected_gather) fail("all-gather");

        DeviceBuffer<float> scatter_in(std::vector<float>(4 * n, r + 1.0f));
        DeviceBuffer<float> scatter_out(4);
        s = coll.ReduceScatter({scatter_in.get(), 4u * n, DataType::kFloat32},
                               {scatter_out.get(), 4, DataType::kFloat32}, ReduceOp::kSum)
                ->Wait();
        if (!s.ok() || scatter_out.ToHost() != std::vector<float>(4, n * (n + 1) / 2.0f)) {
          fail("reduce-scatter");
        }
        s = coll.Barrier()->Wait();
        if (!s.ok()) fail("barrier: " + s.ToString());
        c->reset();
        cudaFreeHost(pinned);
        cudaStreamDestroy(compute);
      },
      absl::Seconds(240));
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << n;
}

// The job-shaped warm-up on real NCCL: every kind at a bucket's size (reduce-scatter and
// all-gather in place on the scratch buffer) within the init deadline; afterwards 200
// operations (their events reused from the pool), a reduce-scatter and the close succeed.
TEST(GpuSuite, TheWarmUpRunsEveryKindAtBucketSizeAndOperationsWorkAfterIt) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  auto store = std::make_shared<InMemoryKeyValueStore>();
  constexpr size_t kBucket = size_t{25} << 18;  // 25 MiB of fp32
  std::vector<std::string> failures(n);
  RunRanks(
      n,
      [&](int r) {
        auto fail = [&](const std::string& what) {
          if (failures[r].empty()) failures[r] = what;
        };
        if (cudaSetDevice(r) != cudaSuccess) return fail("cudaSetDevice");
        NcclOptions o = SuiteNcclOptions(nullptr);
        o.warm_up = {
            {CollectiveKind::kAllGather, static_cast<size_t>(n), DataType::kFloat32,
             ReduceOp::kSum},
            {CollectiveKind::kAllReduce, kBucket / 25, DataType::kFloat32, ReduceOp::kAvg},
            {CollectiveKind::kAllReduce, kBucket, DataType::kBFloat16, ReduceOp::kAvg},
            {CollectiveKind::kReduceScatter, kBucket + 1, DataType::kFloat32, ReduceOp::kAvg},
            {CollectiveKind::kAllGather, kBucket, DataType::kFloat32, ReduceOp::kSum},
            {CollectiveKind::kBroadcast, kBucket, DataType::kFloat32, ReduceOp::kSum},
        };
        auto c = CreateNcclCollective(store, "suite/warm/", r, n, r, o);
        if (!c.ok()) return fail(c.status().ToString());
        DeviceBuffer<float> buf(std::vector<float>(1024, 1.0f));
        for (int i = 0; i < 200; ++i) {
          absl::Status s =
              (*c)->AllReduce({buf.get(), 1024, DataType::kFloat32}, ReduceOp::kMax)->Wait();
          if (!s.ok()) return fail(absl::StrCat("all-reduce ", i, ": ", s.ToString()));
        }
        if (buf.ToHost() != std::vector<float>(1024, 1.0f)) fail("max of ones");
        DeviceBuffer<float> in(std::vector<float>(2 * n, r + 1.0f));
        DeviceBuffer<float> out(2);
        absl::Status s = (*c)->ReduceScatter({in.get(), 2u * n, DataType::kFloat32},
                                             {out.get(), 2, DataType::kFloat32}, ReduceOp::kSum)
                             ->Wait();
        if (!s.ok() || out.ToHost() != std::vector<float>(2, n * (n + 1) / 2.0f)) {
          fail("reduce-scatter after the warm-up: " + s.ToString());
        }
        s = (*c)->Close(absl::Seconds(30));
        if (!s.ok()) fail("close: " + s.ToString());
      },
      absl::Seconds(240));
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << n;
}

// The side channel on real NCCL (strategy fsdp's gathers), one rank per GPU: with the compute
// stream held by a host function, a reduce-scatter issued with the default ordering waits for
// it, while an all-gather on the side channel issued after it, ordered only after a mark taken
// before the hold, completes: it waits neither for compute queued after its mark nor behind the
// pending reduce-scatter. Then OrderCompute makes the compute stream wait for the gather on the
// device, and a copy queued there after it reads the gathered values.
TEST(GpuSuite, TheSideChannelGathersBesideHeldComputeAndPendingReduceScatters) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  auto store = std::make_shared<InMemoryKeyValueStore>();
  constexpr size_t kSlice = 1024;
  std::vector<std::string> failures(n);
  RunRanks(
      n,
      [&](int r) {
        auto fail = [&](const std::string& what) {
          if (failures[r].empty()) failures[r] = what;
        };
        if (cudaSetDevice(r) != cudaSuccess) return fail("cudaSetDevice");
        cudaStream_t compute;
        cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
        NcclOptions o = SuiteNcclOptions(compute);
        o.side_channel = true;
        o.warm_up = {{CollectiveKind::kAllGather, kSlice * n, DataType::kFloat32, ReduceOp::kSum}};
        auto c = CreateNcclCollective(store, "suite/side/", r, n, r, o);
        if (!c.ok()) return fail(c.status().ToString());
        Collective* side = (*c)->side_channel();
        if (side == nullptr) return fail("no side channel");
        // Everything allocated before the hold: cudaMalloc and cudaFree may synchronise.
        DeviceBuffer<float> shard(std::vector<float>(kSlice, r + 1.0f));
        DeviceBuffer<float> gathered(kSlice * n);
        DeviceBuffer<float> rs_in(std::vector<float>(kSlice * n, 1.0f));
        DeviceBuffer<float> rs_out(kSlice);
        float* pinned;
        cudaMallocHost(&pinned, kSlice * n * sizeof(float));
        absl::StatusOr<std::shared_ptr<const ComputeMark>> mark = side->MarkCompute();
        if (!mark.ok()) return fail(mark.status().ToString());

        absl::Notification release;
        cudaLaunchHostFunc(
            compute,
            [](void* n) { static_cast<absl::Notification*>(n)->WaitForNotification(); },
            &release);
        std::shared_ptr<Work> rs =
            (*c)->ReduceScatter({rs_in.get(), kSlice * n, DataType::kFloat32},
                                {rs_out.get(), kSlice, DataType::kFloat32}, ReduceOp::kSum);
        CollectiveOptions after;
        after.after = *mark;
        after.timeout = absl::Seconds(20);
        std::shared_ptr<Work> gather = side->AllGather(
            {shard.get(), kSlice, DataType::kFloat32},
            {gathered.get(), kSlice * n, DataType::kFloat32}, after);
        const absl::Status g = gather->Wait();
        const bool rs_pending = !rs->IsDone();
        const bool compute_held = cudaStreamQuery(compute) == cudaErrorNotReady;
        const absl::Status ordered = gather->OrderCompute();
        cudaMemcpyAsync(pinned, gathered.get(), kSlice * n * sizeof(float),
                        cudaMemcpyDeviceToHost, compute);
        release.Notify();
        if (!g.ok()) fail("the gather: " + g.ToString());
        if (!rs_pending) fail("the reduce-scatter ran although the compute stream was held");
        if (!compute_held) fail("the compute stream was not held while the gather ran");
        if (!ordered.ok()) fail("OrderCompute: " + ordered.ToString());
        const absl::Status rs_done = rs->Wait();
        if (!rs_done.ok()) fail("the reduce-scatter: " + rs_done.ToString());
        cudaStreamSynchronize(compute);
        for (int q = 0; q < n; ++q) {
          if (!std::all_of(pinned + q * kSlice, pinned + (q + 1) * kSlice,
                           [q](float v) { return v == q + 1.0f; })) {
            fail(absl::StrCat("rank ", q, "'s slice was not gathered"));
          }
        }
        if (rs_out.ToHost() != std::vector<float>(kSlice, static_cast<float>(n))) {
          fail("the reduce-scatter's sum");
        }
        cudaFreeHost(pinned);
        const absl::Status closed = (*c)->Close(absl::Seconds(30));
        if (!closed.ok()) fail("close: " + closed.ToString());
        cudaStreamDestroy(compute);
      },
      absl::Seconds(120));
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << n;
}

// World size = GPUs + 1, and the extra rank never starts: every present rank's init times out
// (DEADLINE_EXCEEDED naming the missing rank) and aborts its communicator instead of hanging.
TEST(GpuSuite, ARankThatNeverJoinsMakesTheOthersTimeOutAndAbortCleanly) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  const int world = n + 1;
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::Status> results(n);
  RunRanks(
      n,
      [&](int r) {
        cudaSetDevice(r);
        NcclOptions o = SuiteNcclOptions(nullptr);
        o.init_timeout = absl::Seconds(5);
        results[r] = CreateNcclCollective(store, "suite/missing/", r, world, r, o).status();
      },
      absl::Seconds(120));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    EXPECT_THAT(std::string(results[r].message()),
                HasSubstr(absl::StrCat("never started communicator init: ", world - 1, ")")));
  }
}

// Two GPUs: rank 1 stays silent while rank 0 runs an all-reduce. Rank 0's Work passes its
// deadline -> DEADLINE_EXCEEDED and ncclCommAbort. Then rank 1 issues a broadcast that can never
// complete and aborts it, as the coordinator's abort would. Independent of NCCL's connection
// mode (NCCL_RUNTIME_CONNECT): the ranks connected during creation (the warm-up all-reduce), and
// rank 1's broadcast ends either ABORTED with the reason or, when NCCL noticed rank 0's aborted
// communicator first, UNAVAILABLE — never by a timeout, and every later call fails the same way.
TEST(GpuSuite, ASilentPeerMakesAWorkTimeOutAndAbortEndsThePeersWork) {
  RL_SKIP_WITHOUT_GPU(2);
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<absl::Status> results(2);
  absl::Notification rank0_done;
  RunRanks(
      2,
      [&](int r) {
        cudaSetDevice(r);
        auto c = CreateNcclCollective(store, "suite/silent/", r, 2, r, SuiteNcclOptions(nullptr));
        if (!c.ok()) {
          results[r] = c.status();
          if (r == 0) rank0_done.Notify();
          return;
        }
        DeviceBuffer<float> buf(256);
        if (r == 0) {
          CollectiveOptions opts;
          opts.timeout = absl::Seconds(3);
          results[0] =
              (*c)->AllReduce({buf.get(), 256, DataType::kFloat32}, ReduceOp::kSum, opts)->Wait();
          rank0_done.Notify();
        } else {
          // Stay alive and silent until rank 0 has given up, so its failure is a pure timeout.
          if (!rank0_done.WaitForNotificationWithTimeout(absl::Seconds(60))) return;
          auto work = (*c)->Broadcast({buf.get(), 16, DataType::kFloat32}, 0);
          (*c)->Abort(absl::UnavailableError("coordinator: abort the attempt"));
          results[1] = work->Wait();
          const absl::Status later = (*c)->Barrier()->Wait();
          if (later != results[1]) {
            results[1] = absl::InternalError("later call: " + later.ToString());
          }
        }
      },
      absl::Seconds(120));
  EXPECT_EQ(results[0].code(), absl::StatusCode::kDeadlineExceeded) << results[0];
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("did not finish within 3s"));
  if (results[1].code() == absl::StatusCode::kAborted) {
    EXPECT_THAT(std::string(results[1].message()), HasSubstr("coordinator: abort the attempt"));
  } else {
    EXPECT_EQ(results[1].code(), absl::StatusCode::kUnavailable) << results[1];
  }
}

// Data-parallel training over NCCL on every GPU: each rank's gradient is all-reduced (kAvg) the
// moment it is ready during backward; after 3 steps every rank's parameters match the CPU
// trainer stepping on the average of the per-shard gradients.
TEST(GpuSuite, DataParallelStepsOverNcclMatchTheCpuAverage) {
  RL_SKIP_WITHOUT_GPU(1);
  const int n = GpuCount();
  const std::vector<size_t> layers = {32, 24, 6};
  constexpr size_t kBatch = 16;
  const Dataset data = MakeSyntheticDataset(kBatch * n * 3, layers[0], 6, 12);
  // CPU reference: per step, the gradients of every shard, averaged, then one SGD step.
  Mlp reference(layers, 31);
  SgdOptimizer ref_opt(reference.parameters(), TestSgd());
  std::vector<std::vector<float>> averaged(reference.parameters().size());
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < averaged.size(); ++i)
      averaged[i].assign(reference.parameters()[i].count, 0.0f);
    for (int r = 0; r < n; ++r) {
      reference.ZeroGradients();
      const size_t start = (step * n + r) * kBatch;
      ASSERT_TRUE(reference.ForwardBackward(data.example(start), &data.y[start], kBatch, {}).ok());
      for (size_t i = 0; i < averaged.size(); ++i) {
        for (size_t k = 0; k < averaged[i].size(); ++k) averaged[i][k] += reference.grad(i)[k] / n;
      }
    }
    std::vector<float*> p;
    std::vector<const float*> g;
    for (size_t i = 0; i < averaged.size(); ++i) {
      p.push_back(reference.param(i));
      g.push_back(averaged[i].data());
    }
    ref_opt.Step(p, g, std::vector<bool>(p.size(), true));
  }

  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::string> failures(n);
  std::vector<double> diffs(n, -1);
  RunRanks(
      n,
      [&](int r) {
        Mlp init(layers, 31);
        GpuMlpOptions mo;
        mo.device = r;
        auto model = GpuMlp::Create(init, mo);
        if (!model.ok()) {
          failures[r] = model.status().ToString();
          return;
        }
        auto c =
            CreateNcclCollective(store, "suite/ddp/", r, n, r, SuiteNcclOptions((*model)->stream()));
        if (!c.ok()) {
          failures[r] = c.status().ToString();
          return;
        }
        auto opt =
            GpuSgdOptimizer::Create((*model)->parameters(), TestSgd(), r, (*model)->stream());
        if (!opt.ok()) {
          failures[r] = opt.status().ToString();
          return;
        }
        for (int step = 0; step < 3 && failures[r].empty(); ++step) {
          std::vector<std::shared_ptr<Work>> works;
          BackwardOptions bo;
          bo.on_ready = [&](size_t i) {
            works.push_back((*c)->AllReduce(
                {(*model)->grad(i), (*model)->parameters()[i].count, DataType::kFloat32},
                ReduceOp::kAvg));
          };
          if (!(*model)->ZeroGradients().ok()) failures[r] = "zero";
          const size_t start = (step * n + r) * kBatch;
          auto loss = (*model)->ForwardBackward(data.example(start), &data.y[start], kBatch, bo);
          if (!loss.ok()) failures[r] = loss.status().ToString();
          for (auto& w : works) {
            absl::Status s = w->Wait();
            if (!s.ok()) failures[r] = s.ToString();
          }
          absl::Status s = (*opt)->Step((*model)->param_ptrs(), (*model)->grad_ptrs(),
                                        std::vector<bool>(layers.size() * 2 - 2, true));
          if (!s.ok()) failures[r] = s.ToString();
        }
        Mlp out(layers, 0);
        if ((*model)->CopyParametersTo(out).ok()) diffs[r] = MaxParamDiff(out, reference);
      },
      absl::Seconds(240));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(failures[r], "") << "rank " << r;
    EXPECT_GE(diffs[r], 0.0) << "rank " << r;
    EXPECT_LE(diffs[r], kFp32ParamAtol) << "rank " << r;
  }
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
