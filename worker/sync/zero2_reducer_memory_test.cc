// The zero2 reducer over the memory seam (tensor_memory.h), as it runs on the GPU trainer: its
// gradient shard, bucket pool, readiness/norm exchange and unready bitmaps live in a
// RecordingTensorMemory (its own pool, NaN-filled allocations, not host-accessible, every
// operation bounds-checked). Over real gloo ranks (world sizes 2 and 3) the shards and the
// global norm are bit-identical to host memory's; at world size 1 the pool is guarded
// (PROT_NONE outside the seam's operations), so any access that bypassed the seam crashes the
// test, and a parameter without gradient is still named through the staged bitmap exchange.
// Gradient accumulation (a second shard, the seam's Add) and bf16 on the wire (the seam's casts)
// are covered both ways.
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/zero2_plan.h"
#include "worker/sync/recording_tensor_memory.h"
#include "worker/sync/sync_test_util.h"
#include "worker/sync/tensor_memory.h"
#include "worker/sync/zero2_reducer.h"

namespace ringleader {
namespace {

using sync_test::FakeCollective;
using sync_test::GuardedFakeCollective;
using sync_test::MakeGlooRanks;
using sync_test::RecordingTensorMemory;
using sync_test::RunRanks;
using sync_test::TestGradient;
using ::testing::HasSubstr;
using Op = RecordingTensorMemory::Op;

const std::vector<ParameterInfo>& Params() {
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(10, 250, 7));
  return *params;
}

Zero2Plan Plan(int world) {
  std::vector<size_t> counts;
  for (const ParameterInfo& p : Params()) counts.push_back(p.count);
  absl::StatusOr<Zero2Plan> plan = PlanZero2(counts, world, Zero2LayoutOptions(0.001, 0.001));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// What one rank ends each step with: its owned gradients (copied out through the seam) and the
// reported norm.
struct RankRun {
  absl::Status status;
  std::vector<std::vector<std::vector<float>>> owned;  // per step, per parameter
  std::vector<double> norms;
};

// Three steps of backward in bucket order, each gradient written into its slot the way a device
// kernel would: through the memory (CopyFromHost), never by a host store. `skip`: parameters
// that get no gradient.
RankRun RunRank(Collective* comm, int rank, const Zero2Plan& plan, TensorMemory* memory,
                const std::set<size_t>& skip = {}, int accumulation = 1, bool bf16 = false) {
  RankRun run;
  Zero2ReducerOptions opts;
  opts.timeout = absl::Seconds(10);
  opts.memory = memory;
  opts.accumulation_steps = accumulation;
  opts.bf16_wire = bf16;
  absl::StatusOr<std::unique_ptr<Zero2Reducer>> created =
      Zero2Reducer::Create(comm, Params(), plan, opts);
  if (!created.ok()) {
    run.status = created.status();
    return run;
  }
  Zero2Reducer* red = created->get();
  for (int64_t step = 1; step <= 3; ++step) {
    red->BeginStep();
    for (int k = 0; k < accumulation; ++k) {
      if (k > 0) EXPECT_TRUE(red->FinishMicroBatch().ok());
      for (size_t p : ReverseRegistrationOrder(Params().size())) {
        if (skip.count(p)) continue;
        std::vector<float> g(Params()[p].count);
        for (size_t e = 0; e < g.size(); ++e) g[e] = TestGradient(rank, step * 10 + k, p, e);
        EXPECT_TRUE(memory->CopyFromHost(red->SlotFor(p), g.data(), g.size() * 4).ok());
        red->MarkReady(p);
      }
    }
    StepSyncStats stats;
    double norm = -1;
    run.status = red->FinishStep(&stats, &norm);
    if (!run.status.ok()) return run;
    run.norms.push_back(norm);
    std::vector<std::vector<float>> owned;
    for (size_t p = 0; p < Params().size(); ++p) {
      std::vector<float> v(plan.shards.owned[rank][p].size());
      if (!v.empty()) {
        EXPECT_TRUE(memory->CopyToHost(v.data(), red->owned_gradient(p), v.size() * 4).ok());
      }
      owned.push_back(std::move(v));
    }
    run.owned.push_back(std::move(owned));
  }
  return run;
}

void ExpectBitIdentical(const RankRun& host, const RankRun& seam, const std::string& what) {
  ASSERT_EQ(host.owned.size(), seam.owned.size()) << what;
  for (size_t s = 0; s < host.owned.size(); ++s) {
    EXPECT_EQ(std::memcmp(&host.norms[s], &seam.norms[s], sizeof(double)), 0)
        << what << " step " << s + 1 << ": norm " << host.norms[s] << " vs " << seam.norms[s];
    for (size_t p = 0; p < host.owned[s].size(); ++p) {
      ASSERT_EQ(host.owned[s][p].size(), seam.owned[s][p].size());
      EXPECT_EQ(std::memcmp(host.owned[s][p].data(), seam.owned[s][p].data(),
                            host.owned[s][p].size() * sizeof(float)),
                0)
          << what << " step " << s + 1 << " parameter " << p;
    }
  }
}

TEST(Zero2ReducerMemoryTest, GlooRanksOverTheSeamMatchHostMemoryBitForBit) {
  struct Case {
    int world;
    int accumulation;
    bool bf16;
  };
  for (const auto& [world, accumulation, bf16] :
       std::vector<Case>{{2, 1, false}, {3, 1, false}, {2, 3, false}, {2, 2, true}}) {
    const Zero2Plan plan = Plan(world);
    ASSERT_GE(plan.layout.buckets.size(), 3u);
    std::vector<RankRun> host(world), seam(world);
    {
      auto ranks = MakeGlooRanks(world);
      RunRanks(world, [&](int r) {
        host[r] = RunRank(ranks[r].get(), r, plan, HostMemory(), {}, accumulation, bf16);
      });
    }
    std::vector<std::unique_ptr<RecordingTensorMemory>> memories;
    for (int r = 0; r < world; ++r) memories.push_back(std::make_unique<RecordingTensorMemory>());
    {
      auto ranks = MakeGlooRanks(world);
      RunRanks(world, [&](int r) {
        seam[r] = RunRank(ranks[r].get(), r, plan, memories[r].get(), {}, accumulation, bf16);
      });
    }
    for (int r = 0; r < world; ++r) {
      const std::string what =
          absl::StrCat("world ", world, " accumulation ", accumulation, " bf16 ", bf16, " rank ", r);
      ASSERT_TRUE(host[r].status.ok()) << what << ": " << host[r].status;
      ASSERT_TRUE(seam[r].status.ok()) << what << ": " << seam[r].status;
      ExpectBitIdentical(host[r], seam[r], what);
      EXPECT_EQ(seam[r].norms, host[0].norms) << what << ": every rank reports the global norm";
      EXPECT_THAT(memories[r]->violations(), ::testing::IsEmpty()) << what;
      EXPECT_EQ(memories[r]->live_allocations(), 0u) << what << ": the reducer freed everything";
      EXPECT_EQ(memories[r]->count(Op::kSquaredSum), 3u) << what << ": one norm per step";
      EXPECT_EQ(memories[r]->count(Op::kAdd), 3u * (accumulation - 1))
          << what << ": one add per later micro-batch";
    }
  }
}

TEST(Zero2ReducerMemoryTest, TouchesGuardedDeviceMemoryOnlyThroughTheSeam) {
  const Zero2Plan plan = Plan(1);
  RecordingTensorMemory guarded(MemoryKind::kDevice, /*guard=*/true);
  GuardedFakeCollective device(&guarded);
  FakeCollective host_comm;
  const RankRun seam = RunRank(&device, 0, plan, &guarded, {}, /*accumulation=*/2);
  const RankRun host = RunRank(&host_comm, 0, plan, HostMemory(), {}, /*accumulation=*/2);
  ASSERT_TRUE(seam.status.ok()) << seam.status;
  ASSERT_TRUE(host.status.ok()) << host.status;
  ExpectBitIdentical(host, seam, "world 1");
  EXPECT_THAT(guarded.violations(), ::testing::IsEmpty());
  EXPECT_EQ(guarded.live_allocations(), 0u);
}

TEST(Zero2ReducerMemoryTest, AnUnreadyParameterIsNamedThroughStagedMemory) {
  const Zero2Plan plan = Plan(1);
  RecordingTensorMemory guarded(MemoryKind::kDevice, /*guard=*/true);
  GuardedFakeCollective device(&guarded);
  const RankRun run = RunRank(&device, 0, plan, &guarded, /*skip=*/{4});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition) << run.status;
  EXPECT_THAT(run.status.message(), HasSubstr("rank 0: " + Params()[4].name));
  EXPECT_THAT(guarded.violations(), ::testing::IsEmpty());
  EXPECT_EQ(guarded.live_allocations(), 0u);
}

TEST(Zero2ReducerMemoryTest, RefusesMemoryOfAnotherKindThanTheCollective) {
  const Zero2Plan plan = Plan(1);
  RecordingTensorMemory device_memory(MemoryKind::kDevice);
  FakeCollective host_comm;
  Zero2ReducerOptions opts;
  opts.memory = &device_memory;
  absl::StatusOr<std::unique_ptr<Zero2Reducer>> made =
      Zero2Reducer::Create(&host_comm, Params(), plan, opts);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(made.status().message(), HasSubstr("zero2 reducer"));
}

}  // namespace
}  // namespace ringleader
