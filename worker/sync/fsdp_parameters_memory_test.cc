// Strategy fsdp's parameter shard over the memory seam (tensor_memory.h), as it runs on the GPU
// trainer: the shard and every gathered bucket live in a RecordingTensorMemory (its own pool,
// NaN-filled allocations, not host-accessible, every operation bounds-checked), and the model's
// parameters handed to LoadOwned / GatherAllInto are pointers in that memory. Over real gloo
// ranks (world sizes 2 and 3) every layer the Mlp acquires, GatherAll, GatherAllInto and the
// owned elements are bit-identical to host memory's; at world size 1 the pool is guarded
// (PROT_NONE outside the seam's operations), so any access that bypassed the seam crashes the
// test.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/fsdp_plan.h"
#include "worker/sync/fsdp_parameters.h"
#include "worker/sync/recording_tensor_memory.h"
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
using ::testing::IsEmpty;
using Vectors = std::vector<std::vector<float>>;

// An Mlp [5, 7, 6, 3]: fc1.weight 35, fc1.bias 7, fc2.weight 42, fc2.bias 6, fc3.weight 18,
// fc3.bias 3.
const std::vector<ParameterInfo>& Params() {
  static const auto* params = [] {
    auto* p = new std::vector<ParameterInfo>;
    const std::vector<size_t> widths = {5, 7, 6, 3};
    for (size_t k = 0; k + 1 < widths.size(); ++k) {
      const std::string layer = absl::StrCat("fc", k + 1);
      p->push_back({layer + ".weight", {widths[k + 1], widths[k]}, widths[k + 1] * widths[k]});
      p->push_back({layer + ".bias", {widths[k + 1]}, widths[k + 1]});
    }
    return p;
  }();
  return *params;
}
constexpr size_t kLayers = 3;

// Small buckets, so that the slices are padded and layers straddle buckets: b0 = [fc3.bias],
// b1 = [fc3.weight fc2.bias], b2 = [fc2.weight], b3 = [fc1.bias fc1.weight]; layer 2 uses b0
// and b1, layer 1 b1 and b2 (b1 stays held from layer 2 to layer 1 in backward).
FsdpPlan Plan(size_t world) {
  std::vector<size_t> counts;
  for (const ParameterInfo& p : Params()) counts.push_back(p.count);
  BucketLayoutOptions o;
  o.first_bucket_bytes = 12;
  o.bucket_cap_bytes = 96;
  absl::StatusOr<FsdpPlan> plan = PlanFsdp(counts, MlpLayerParameters(kLayers), world, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Parameter i's values, `version` 1 before the step, 2 after (the same on every rank).
float Value(int version, size_t i, size_t e) { return TestGradient(0, version, i, e); }

// What one rank observed, every value copied out through the seam.
struct RankRun {
  absl::Status status;
  Vectors acquired;   // per Acquire in the Mlp's order: weight, bias
  Vectors gathered;   // GatherAll (version 1)
  Vectors into;       // GatherAllInto after the owned elements moved to version 2
  Vectors owned;      // owned_parameter's contents (version 2)
  double drift = -1;
  uint64_t gathers = 0;
  size_t parameter_bytes = 0;
};

// Allocates one buffer per parameter in `memory`; fills it with `version`'s values (0: not).
absl::Status Buffers(TensorMemory* memory, int version, std::vector<TensorBuffer<float>>* out) {
  for (size_t i = 0; i < Params().size(); ++i) {
    absl::StatusOr<TensorBuffer<float>> b =
        TensorBuffer<float>::Allocate(memory, Params()[i].count);
    if (!b.ok()) return b.status();
    if (version > 0) {
      std::vector<float> v(b->size());
      for (size_t e = 0; e < v.size(); ++e) v[e] = Value(version, i, e);
      absl::Status s = memory->CopyFromHost(b->data(), v.data(), b->bytes());
      if (!s.ok()) return s;
    }
    out->push_back(*std::move(b));
  }
  return absl::OkStatus();
}

std::vector<float> ToHost(TensorMemory* memory, const float* p, size_t n, absl::Status* s) {
  std::vector<float> v(n);
  if (n > 0 && s->ok()) *s = memory->CopyToHost(v.data(), p, n * sizeof(float));
  return v;
}

absl::Status Steps(Collective* comm, size_t rank, const FsdpPlan& plan, TensorMemory* memory,
                   RankRun* run) {
  FsdpParametersOptions opts;
  opts.timeout = absl::Seconds(10);
  opts.memory = memory;
  absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
      FsdpParameters::Create(comm, Params(), plan, opts);
  if (!made.ok()) return made.status();
  FsdpParameters& params = **made;
  std::vector<TensorBuffer<float>> full;
  absl::Status s = Buffers(memory, 1, &full);
  std::vector<const float*> ptrs;
  for (const TensorBuffer<float>& b : full) ptrs.push_back(b.data());
  if (s.ok()) s = params.LoadOwned(ptrs);
  // The Mlp's pass: forward 0..K-1, backward K-1..1 (layer K-1 still held).
  std::vector<size_t> order;
  for (size_t k = 0; k < kLayers; ++k) order.push_back(k);
  for (size_t k = kLayers - 1; k >= 1; --k) order.push_back(k);
  for (size_t k : order) {
    if (!s.ok()) break;
    absl::StatusOr<LayerParameters> layer = params.Acquire(k);
    if (!layer.ok()) return layer.status();
    run->acquired.push_back(ToHost(memory, layer->weight, Params()[2 * k].count, &s));
    run->acquired.push_back(ToHost(memory, layer->bias, Params()[2 * k + 1].count, &s));
  }
  const absl::Status released = params.Release();
  if (!released.ok()) return released;
  if (!s.ok()) return s;
  absl::StatusOr<Vectors> all = params.GatherAll();
  if (!all.ok()) return all.status();
  run->gathered = *std::move(all);
  absl::StatusOr<DriftResult> drift = params.MeasureGatheredDrift({});
  if (!drift.ok()) return drift.status();
  run->drift = drift->max_drift;
  // The optimizer's step, as a device kernel writes it: through the memory.
  for (size_t i = 0; s.ok() && i < Params().size(); ++i) {
    const ElementRange owned = plan.zero2.shards.owned[rank][i];
    std::vector<float> v(owned.size());
    for (size_t e = 0; e < v.size(); ++e) v[e] = Value(2, i, owned.begin + e);
    if (!v.empty()) s = memory->CopyFromHost(params.owned_parameter(i), v.data(), v.size() * 4);
  }
  std::vector<TensorBuffer<float>> into;
  if (s.ok()) s = Buffers(memory, 0, &into);
  std::vector<float*> into_ptrs;
  for (const TensorBuffer<float>& b : into) into_ptrs.push_back(b.data());
  if (s.ok()) s = params.GatherAllInto(into_ptrs);
  for (size_t i = 0; s.ok() && i < Params().size(); ++i) {
    run->into.push_back(ToHost(memory, into[i].data(), Params()[i].count, &s));
    run->owned.push_back(
        ToHost(memory, params.owned_parameter(i), plan.zero2.shards.owned[rank][i].size(), &s));
  }
  run->gathers = params.gathers();
  run->parameter_bytes = params.parameter_bytes();
  return s;
}

RankRun RunRank(Collective* comm, size_t rank, const FsdpPlan& plan, TensorMemory* memory) {
  RankRun run;
  run.status = Steps(comm, rank, plan, memory, &run);
  return run;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The values every rank must see, and host memory's run bit for bit.
void Expect(const RankRun& host, const RankRun& seam, size_t rank, const FsdpPlan& plan,
            const std::string& what) {
  ASSERT_TRUE(host.status.ok()) << what << ": " << host.status;
  ASSERT_TRUE(seam.status.ok()) << what << ": " << seam.status;
  ASSERT_EQ(seam.acquired.size(), 2 * (2 * kLayers - 1)) << what;
  ASSERT_EQ(seam.acquired.size(), host.acquired.size()) << what;
  for (size_t j = 0; j < seam.acquired.size(); ++j) {
    EXPECT_TRUE(SameBits(seam.acquired[j], host.acquired[j])) << what << " acquired " << j;
  }
  for (size_t j = 0; j < kLayers; ++j) {  // the forward pass: layer j's weight and bias
    for (size_t i : {2 * j, 2 * j + 1}) {
      std::vector<float> expected(Params()[i].count);
      for (size_t e = 0; e < expected.size(); ++e) expected[e] = Value(1, i, e);
      EXPECT_TRUE(SameBits(seam.acquired[2 * j + (i % 2)], expected)) << what << " param " << i;
    }
  }
  ASSERT_EQ(seam.gathered.size(), Params().size()) << what;
  ASSERT_EQ(seam.into.size(), Params().size()) << what;
  for (size_t i = 0; i < Params().size(); ++i) {
    std::vector<float> v1(Params()[i].count), v2(Params()[i].count);
    for (size_t e = 0; e < v1.size(); ++e) {
      v1[e] = Value(1, i, e);
      v2[e] = Value(2, i, e);
    }
    EXPECT_TRUE(SameBits(seam.gathered[i], v1)) << what << " GatherAll " << i;
    EXPECT_TRUE(SameBits(host.gathered[i], v1)) << what << " host GatherAll " << i;
    EXPECT_TRUE(SameBits(seam.into[i], v2)) << what << " GatherAllInto " << i;
    EXPECT_TRUE(SameBits(host.into[i], v2)) << what << " host GatherAllInto " << i;
    const ElementRange owned = plan.zero2.shards.owned[rank][i];
    EXPECT_TRUE(SameBits(seam.owned[i], std::vector<float>(v2.begin() + owned.begin,
                                                           v2.begin() + owned.end)))
        << what << " owned " << i;
    EXPECT_TRUE(SameBits(seam.owned[i], host.owned[i])) << what << " owned " << i;
  }
  EXPECT_EQ(seam.drift, 0.0) << what;
  EXPECT_EQ(seam.gathers, host.gathers) << what;
  EXPECT_EQ(seam.parameter_bytes, host.parameter_bytes) << what;
  EXPECT_EQ(seam.parameter_bytes, 4 * (plan.shard_elements() + plan.staging_elements)) << what;
}

TEST(FsdpParametersMemoryTest, GlooRanksOverTheSeamMatchHostMemoryBitForBit) {
  for (int world : {2, 3}) {
    const FsdpPlan plan = Plan(world);
    ASSERT_EQ(plan.layer_buckets, (std::vector<std::vector<size_t>>{{3}, {1, 2}, {0, 1}}));
    std::vector<RankRun> host(world), seam(world);
    {
      auto ranks = MakeGlooRanks(world);
      RunRanks(world, [&](int r) { host[r] = RunRank(ranks[r].get(), r, plan, HostMemory()); });
    }
    std::vector<std::unique_ptr<RecordingTensorMemory>> memories;
    for (int r = 0; r < world; ++r) memories.push_back(std::make_unique<RecordingTensorMemory>());
    {
      auto ranks = MakeGlooRanks(world);
      RunRanks(world,
               [&](int r) { seam[r] = RunRank(ranks[r].get(), r, plan, memories[r].get()); });
    }
    for (int r = 0; r < world; ++r) {
      const std::string what = absl::StrCat("world ", world, " rank ", r);
      Expect(host[r], seam[r], r, plan, what);
      EXPECT_THAT(memories[r]->violations(), IsEmpty()) << what;
      EXPECT_EQ(memories[r]->live_allocations(), 0u) << what << ": everything freed";
      EXPECT_GE(memories[r]->count(RecordingTensorMemory::Op::kCopy), 1u)
          << what << ": LoadOwned and GatherAllInto copy inside the memory";
      EXPECT_GE(memories[r]->count(RecordingTensorMemory::Op::kZero), 1u)
          << what << ": the shard's padding is zeroed through the memory";
    }
  }
}

TEST(FsdpParametersMemoryTest, TouchesGuardedDeviceMemoryOnlyThroughTheSeam) {
  const FsdpPlan plan = Plan(1);
  RecordingTensorMemory guarded(MemoryKind::kDevice, /*guard=*/true);
  GuardedFakeCollective device(&guarded);
  FakeCollective host_comm;
  const RankRun seam = RunRank(&device, 0, plan, &guarded);
  const RankRun host = RunRank(&host_comm, 0, plan, HostMemory());
  Expect(host, seam, 0, plan, "world 1");
  EXPECT_THAT(guarded.violations(), IsEmpty());
  EXPECT_EQ(guarded.live_allocations(), 0u);
}

TEST(FsdpParametersMemoryTest, RefusesMisuseOfTheMemory) {
  const FsdpPlan plan = Plan(1);
  // Host memory (explicit or null) against a device collective, and the reverse.
  RecordingTensorMemory device_memory(MemoryKind::kDevice);
  FakeCollective device_comm("nccl", MemoryKind::kDevice);
  FakeCollective host_comm;
  for (TensorMemory* host : {HostMemory(), static_cast<TensorMemory*>(nullptr)}) {
    FsdpParametersOptions opts;
    opts.memory = host;
    absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
        FsdpParameters::Create(&device_comm, Params(), plan, opts);
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << made.status();
    EXPECT_THAT(made.status().message(), HasSubstr("fsdp parameters"));
  }
  FsdpParametersOptions opts;
  opts.memory = &device_memory;
  EXPECT_EQ(FsdpParameters::Create(&host_comm, Params(), plan, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_memory.live_allocations(), 0u) << "refused before allocating";

  // Over device memory: the drift check must run there, GatherAllInto needs every pointer.
  absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
      FsdpParameters::Create(&device_comm, Params(), plan, opts);
  ASSERT_TRUE(made.ok()) << made.status();
  DriftOptions drift;
  drift.memory = HostMemory();
  EXPECT_EQ((*made)->MeasureGatheredDrift(drift).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float*> none(Params().size(), nullptr);
  absl::Status into = (*made)->GatherAllInto(none);
  EXPECT_EQ(into.code(), absl::StatusCode::kInvalidArgument) << into;
  EXPECT_THAT(into.message(), HasSubstr(Params()[0].name));
  EXPECT_EQ((*made)->gathers(), 0u) << "refused before any gather";
  made->reset();
  EXPECT_EQ(device_memory.live_allocations(), 0u);
  EXPECT_THAT(device_memory.violations(), IsEmpty());
}

}  // namespace
}  // namespace ringleader
