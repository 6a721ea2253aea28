// The memory seam (tensor_memory.h) end to end: the reducer and the drift check running over
// RecordingTensorMemory — its own pool, NaN-filled allocations, not host-accessible, every
// operation bounds-checked — give bit-identical results to host memory, over real gloo ranks
// (world sizes 2 and 3). At world size 1 the pool is guarded (PROT_NONE outside the seam's
// operations), so any arena access that bypassed the seam crashes the test. Memory-kind
// mismatches (host memory for a device collective and the reverse) are refused.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/sync/buffer_sync.h"
#include "worker/sync/drift.h"
#include "worker/sync/recording_tensor_memory.h"
#include "worker/sync/reducer.h"
#include "worker/sync/sync_test_util.h"
#include "worker/sync/tensor_memory.h"

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
  static const auto* params = new std::vector<ParameterInfo>(sync_test::MixedParams(16, 400, 5));
  return *params;
}

struct Scenario {
  std::string name;
  ReducerOptions opts;
  int steps = 3;
  std::set<size_t> unused_on_rank1;  // no gradient, no MarkReady on rank 1
  bool shuffled_order = false;       // a different gradient-ready order per rank and step
  bool extra_bucket_on_rank1 = false;
};

struct RunResult {
  absl::Status status;                                 // the first failing FinishStep
  std::vector<std::vector<std::vector<float>>> slots;  // per synced step, per parameter
  std::vector<StepSyncStats> stats;
};

// What a device kernel does to a slot: slot += scale x the test gradient, through the seam.
void AccumulateGradient(TensorMemory* memory, float* slot, int rank, int64_t seed, size_t p,
                        float scale) {
  std::vector<float> v(Params()[p].count);
  ASSERT_TRUE(memory->CopyToHost(v.data(), slot, v.size() * sizeof(float)).ok());
  for (size_t e = 0; e < v.size(); ++e) v[e] += scale * TestGradient(rank, seed, p, e);
  ASSERT_TRUE(memory->CopyFromHost(slot, v.data(), v.size() * sizeof(float)).ok());
}

std::vector<size_t> ReadyOrder(const Scenario& sc, int rank, int64_t step) {
  std::vector<size_t> order = ReverseRegistrationOrder(Params().size());
  if (sc.shuffled_order) std::shuffle(order.begin(), order.end(), std::mt19937(rank * 97 + step));
  return order;
}

RunResult RunScenario(Collective* comm, int rank, const Scenario& sc, TensorMemory* memory) {
  RunResult out;
  ReducerOptions o = sc.opts;
  o.memory = memory;
  auto reducer = Reducer::Create(comm, Params(), o);
  if (!reducer.ok()) {
    out.status = reducer.status();
    return out;
  }
  Reducer* red = reducer->get();
  if (sc.extra_bucket_on_rank1 && rank == 1) red->InjectExtraBucketForTest(33);
  const int k_steps = o.gradient_accumulation_steps;
  for (int64_t step = 1; step <= sc.steps; ++step) {
    red->ZeroGradients();
    for (int k = 0; k < k_steps; ++k) {
      red->BeginMicroBatch(k);
      const std::vector<float*> slots = red->gradient_slots();
      for (size_t p : ReadyOrder(sc, rank, step)) {
        if (rank == 1 && sc.unused_on_rank1.count(p)) continue;
        AccumulateGradient(memory, slots[p], rank, step * 10 + k, p, 1.0f / k_steps);
        red->MarkReady(p);
      }
      StepSyncStats stats;
      out.status = red->FinishStep(&stats);
      if (!out.status.ok()) return out;
      if (k + 1 == k_steps) out.stats.push_back(stats);
    }
    std::vector<std::vector<float>> values;
    for (size_t p = 0; p < Params().size(); ++p) {
      values.emplace_back(Params()[p].count);
      EXPECT_TRUE(memory
                      ->CopyToHost(values.back().data(), red->gradient_slots()[p],
                                   values.back().size() * sizeof(float))
                      .ok());
    }
    out.slots.push_back(std::move(values));
  }
  return out;
}

void ExpectBitIdentical(const RunResult& host, const RunResult& seam, const std::string& what) {
  ASSERT_EQ(host.status.code(), seam.status.code()) << what << ": " << seam.status;
  EXPECT_EQ(host.status.message(), seam.status.message()) << what;
  ASSERT_EQ(host.slots.size(), seam.slots.size()) << what;
  for (size_t s = 0; s < host.slots.size(); ++s) {
    for (size_t p = 0; p < Params().size(); ++p) {
      EXPECT_EQ(std::memcmp(host.slots[s][p].data(), seam.slots[s][p].data(),
                            host.slots[s][p].size() * sizeof(float)),
                0)
          << what << ": step " << s + 1 << " parameter " << p << " differs bitwise";
    }
  }
  ASSERT_EQ(host.stats.size(), seam.stats.size()) << what;
  for (size_t s = 0; s < host.stats.size(); ++s) {
    EXPECT_EQ(host.stats[s].collective_digest, seam.stats[s].collective_digest) << what;
    EXPECT_EQ(host.stats[s].buckets, seam.stats[s].buckets) << what;
    EXPECT_EQ(host.stats[s].unused_parameters, seam.stats[s].unused_parameters) << what;
    EXPECT_EQ(host.stats[s].ledger_checked, seam.stats[s].ledger_checked) << what;
  }
}

std::vector<Scenario> Scenarios() {
  ReducerOptions base;
  base.first_bucket_mb = 0.001;
  base.bucket_cap_mb = 0.003;
  base.timeout = absl::Seconds(10);
  std::vector<Scenario> all;
  all.push_back({"fp32 overlap", base});
  Scenario bf16{"bf16 + accumulation", base};
  bf16.opts.comm_dtype = DataType::kBFloat16;
  bf16.opts.gradient_accumulation_steps = 2;
  all.push_back(bf16);
  Scenario unused{"find_unused + rebuild, no overlap", base};
  unused.opts.find_unused_parameters = true;
  unused.opts.rebuild_buckets = true;
  unused.opts.overlap = false;
  unused.unused_on_rank1 = {3, 9};
  unused.shuffled_order = true;
  all.push_back(unused);
  Scenario fails{"unused without find_unused", base};
  fails.unused_on_rank1 = {6};
  all.push_back(fails);
  Scenario desync{"ledger desync", base};
  desync.extra_bucket_on_rank1 = true;
  all.push_back(desync);
  return all;
}

TEST(ReducerMemoryTest, SeamMemoryGivesBitIdenticalResultsToHostMemory) {
  for (int world = 2; world <= 3; ++world) {
    for (const Scenario& sc : Scenarios()) {
      const std::string what = absl::StrCat("world ", world, ", ", sc.name);
      auto ranks = MakeGlooRanks(world);
      std::vector<RunResult> host(world), seam(world);
      std::vector<std::unique_ptr<RecordingTensorMemory>> memories(world);
      for (auto& m : memories) m = std::make_unique<RecordingTensorMemory>();
      RunRanks(world, [&](int r) {
        host[r] = RunScenario(ranks[r].get(), r, sc, HostMemory());
        seam[r] = RunScenario(ranks[r].get(), r, sc, memories[r].get());
      });
      for (int r = 0; r < world; ++r) {
        const std::string who = absl::StrCat(what, ", rank ", r);
        ExpectBitIdentical(host[r], seam[r], who);
        RecordingTensorMemory& m = *memories[r];
        EXPECT_THAT(m.violations(), ::testing::IsEmpty()) << who;
        EXPECT_EQ(m.live_allocations(), 0u) << who << ": the reducer freed everything";
        int buckets = 0;
        for (const StepSyncStats& s : seam[r].stats) buckets += s.buckets;
        if (sc.opts.comm_dtype == DataType::kBFloat16) {
          EXPECT_EQ(m.count(Op::kCastToBf16), static_cast<size_t>(buckets)) << who;
          EXPECT_EQ(m.count(Op::kCastFromBf16), seam[r].stats.size()) << who;
        } else {
          EXPECT_EQ(m.count(Op::kCastToBf16), 0u) << who;
        }
        // A rebuild moves every parameter's reduced gradient into the new arena.
        EXPECT_EQ(m.count(Op::kCopy), sc.opts.rebuild_buckets ? Params().size() : 0u) << who;
      }
      if (!sc.unused_on_rank1.empty() && !sc.opts.find_unused_parameters) {
        EXPECT_EQ(seam[0].status.code(), absl::StatusCode::kFailedPrecondition) << what;
        EXPECT_THAT(std::string(seam[0].status.message()), HasSubstr(Params()[6].name)) << what;
      }
      if (sc.extra_bucket_on_rank1) {
        EXPECT_THAT(std::string(seam[0].status.message()), HasSubstr("collective desync")) << what;
      }
    }
  }
}

TEST(ReducerMemoryTest, ReducerAndDriftTouchGuardedMemoryOnlyThroughTheSeam) {
  for (const Scenario& sc : Scenarios()) {
    if (sc.extra_bucket_on_rank1 || !sc.unused_on_rank1.empty()) continue;  // need rank 1
    RecordingTensorMemory guarded(MemoryKind::kDevice, /*guard=*/true);
    GuardedFakeCollective device(&guarded);
    FakeCollective host_comm;
    const RunResult seam = RunScenario(&device, 0, sc, &guarded);
    const RunResult host = RunScenario(&host_comm, 0, sc, HostMemory());
    ASSERT_TRUE(seam.status.ok()) << sc.name << ": " << seam.status;
    ExpectBitIdentical(host, seam, sc.name);
    EXPECT_THAT(guarded.violations(), ::testing::IsEmpty()) << sc.name;
    EXPECT_EQ(guarded.live_allocations(), 0u) << sc.name;
  }
  // Unready parameters on the only rank: the bitmap exchange is staged too.
  RecordingTensorMemory guarded(MemoryKind::kDevice, /*guard=*/true);
  GuardedFakeCollective device(&guarded);
  Scenario unused = Scenarios()[3];
  ASSERT_EQ(unused.name, "unused without find_unused");
  unused.unused_on_rank1.clear();
  ReducerOptions o = unused.opts;
  o.memory = &guarded;
  {
    auto red = Reducer::Create(&device, Params(), o);
    ASSERT_TRUE(red.ok());
    (*red)->ZeroGradients();
    (*red)->BeginMicroBatch(0);
    for (size_t p = 1; p < Params().size(); ++p) (*red)->MarkReady(p);
    absl::Status s = (*red)->FinishStep(nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0: " + Params()[0].name));
  }
  // The drift check on parameters in guarded memory.
  {
    std::vector<TensorBuffer<float>> params;
    std::vector<const float*> ptrs;
    for (const ParameterInfo& p : Params()) {
      params.push_back(*TensorBuffer<float>::Allocate(&guarded, p.count));
      ASSERT_TRUE(guarded.Zero(params.back().data(), params.back().bytes()).ok());
      ptrs.push_back(params.back().data());
    }
    DriftOptions d;
    d.memory = &guarded;
    auto drift = MeasureDrift(&device, Params(), ptrs, d);
    ASSERT_TRUE(drift.ok()) << drift.status();
    EXPECT_EQ(drift->max_drift, 0.0);
  }
  EXPECT_THAT(guarded.violations(), ::testing::IsEmpty());
  EXPECT_EQ(guarded.live_allocations(), 0u);
}

TEST(ReducerMemoryTest, MemoryKindMustMatchTheCollective) {
  FakeCollective nccl("nccl", MemoryKind::kDevice);
  ReducerOptions o;
  absl::Status s = Reducer::Create(&nccl, Params(), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("backend 'nccl' works on device memory"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("host memory"));

  RecordingTensorMemory device_memory(MemoryKind::kDevice);
  FakeCollective gloo("gloo", MemoryKind::kHost);
  o.memory = &device_memory;
  s = Reducer::Create(&gloo, Params(), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("working memory is device memory"));
  EXPECT_TRUE(nccl.calls().empty());
  EXPECT_TRUE(gloo.calls().empty());
  EXPECT_EQ(device_memory.count(Op::kAllocate), 0u) << "refused before allocating";

  // Device memory with a device collective: a whole step runs (world size 1).
  {
    auto reducer = Reducer::Create(&nccl, Params(), o);
    ASSERT_TRUE(reducer.ok()) << reducer.status();
    (*reducer)->ZeroGradients();
    (*reducer)->BeginMicroBatch(0);
    for (size_t p : ReverseRegistrationOrder(Params().size())) (*reducer)->MarkReady(p);
    EXPECT_TRUE((*reducer)->FinishStep(nullptr).ok());
  }
  EXPECT_FALSE(nccl.calls().empty());
  EXPECT_THAT(device_memory.violations(), ::testing::IsEmpty());
  EXPECT_EQ(device_memory.live_allocations(), 0u);

  std::vector<float> w(Params()[0].count, 1.0f);
  std::vector<const float*> ptrs(Params().size(), w.data());
  EXPECT_EQ(MeasureDrift(&nccl, Params(), ptrs).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> mean(3, 0.0f);
  std::vector<BufferInfo> buffers = {{"bn.mean", BufferType::kFloat32, 3, mean.data()}};
  s = BroadcastBuffers(&nccl, buffers, BufferSyncOptions());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("buffer broadcast"));
  EXPECT_TRUE(BroadcastBuffers(&nccl, {}, BufferSyncOptions()).ok()) << "nothing to broadcast";
}

// Equal, or both NaN.
void ExpectSameDrift(double seam, double host) {
  if (std::isnan(host)) {
    EXPECT_TRUE(std::isnan(seam)) << seam;
  } else {
    EXPECT_EQ(seam, host);
  }
}

TEST(ReducerMemoryTest, DriftOverSeamMemoryEqualsHostDrift) {
  constexpr int kWorld = 3;
  auto ranks = MakeGlooRanks(kWorld);
  // Rank 2 drifts on tensor 4; rank 1 has a NaN in tensor 7 on the second check.
  auto weights = [](int r, bool with_nan) {
    std::vector<std::vector<float>> w;
    for (size_t p = 0; p < Params().size(); ++p) {
      w.emplace_back(Params()[p].count);
      for (size_t e = 0; e < w.back().size(); ++e) w.back()[e] = TestGradient(0, 0, p, e);
    }
    if (r == 2) w[4][1] += 0.25f;
    if (r == 1 && with_nan) w[7][0] = std::nanf("");
    return w;
  };
  std::vector<absl::StatusOr<DriftResult>> host[2], seam[2];
  for (auto* v : {&host[0], &host[1], &seam[0], &seam[1]})
    v->resize(kWorld, absl::UnknownError(""));
  std::vector<std::unique_ptr<RecordingTensorMemory>> memories(kWorld);
  for (auto& m : memories) m = std::make_unique<RecordingTensorMemory>();
  RunRanks(kWorld, [&](int r) {
    for (int check = 0; check < 2; ++check) {
      std::vector<std::vector<float>> w = weights(r, check == 1);
      std::vector<const float*> host_ptrs;
      for (const auto& t : w) host_ptrs.push_back(t.data());
      host[check][r] = MeasureDrift(ranks[r].get(), Params(), host_ptrs);
      // The same parameters living in the seam memory.
      std::vector<TensorBuffer<float>> device;
      std::vector<const float*> device_ptrs;
      for (const auto& t : w) {
        device.push_back(*TensorBuffer<float>::Allocate(memories[r].get(), t.size()));
        ASSERT_TRUE(memories[r]->CopyFromHost(device.back().data(), t.data(), t.size() * 4).ok());
        device_ptrs.push_back(device.back().data());
      }
      DriftOptions o;
      o.memory = memories[r].get();
      seam[check][r] = MeasureDrift(ranks[r].get(), Params(), device_ptrs, o);
    }
  });
  for (int check = 0; check < 2; ++check) {
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(host[check][r].ok()) << host[check][r].status();
      ASSERT_TRUE(seam[check][r].ok()) << seam[check][r].status();
      const DriftResult& h = *host[check][r];
      const DriftResult& s = *seam[check][r];
      EXPECT_EQ(s.worst_parameter, h.worst_parameter);
      EXPECT_EQ(s.worst_rank, h.worst_rank);
      ExpectSameDrift(s.max_drift, h.max_drift);
      ExpectSameDrift(s.local_max_drift, h.local_max_drift);
      ASSERT_EQ(s.per_parameter.size(), h.per_parameter.size());
      for (size_t p = 0; p < h.per_parameter.size(); ++p) {
        ExpectSameDrift(s.per_parameter[p], h.per_parameter[p]);
      }
    }
    EXPECT_EQ(seam[check][0]->worst_parameter, Params()[check == 0 ? 4 : 7].name)
        << "check " << check;
  }
  EXPECT_GT(seam[0][0]->max_drift, 0.2);
  for (auto& m : memories) {
    EXPECT_THAT(m->violations(), ::testing::IsEmpty());
    EXPECT_EQ(m->live_allocations(), 0u);
    EXPECT_EQ(m->count(Op::kMaxAbsDiff), 2u) << "one comparison per check, on the memory";
  }
}

}  // namespace
}  // namespace ringleader
