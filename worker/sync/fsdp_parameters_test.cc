#include "worker/sync/fsdp_parameters.h"

#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plan/fsdp_plan.h"
#include "worker/collective/collective.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/sync_test_util.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

using sync_test::MakeGlooRanks;
using sync_test::RunRanks;

// Layers [2, 3, 2] with buckets b0 = [fc2.bias], b1 = [fc2.weight], b2 = [fc1.bias fc1.weight]
// (fsdp_plan_test.cc): layer 1 straddles two buckets.
FsdpPlan SmallPlan(size_t world) {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 8;
  o.bucket_cap_bytes = 16;
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({6, 3, 6, 2}, MlpLayerParameters(2), world, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

std::unique_ptr<FsdpParameters> Load(Collective* comm, const Mlp& model, const FsdpPlan& plan,
                                     CollectiveLedger* ledger) {
  FsdpParametersOptions opts;
  opts.ledger = ledger;
  absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
      FsdpParameters::Create(comm, model.parameters(), plan, opts);
  EXPECT_TRUE(made.ok()) << made.status();
  std::vector<const float*> full;
  for (size_t i = 0; i < model.parameters().size(); ++i) full.push_back(model.param(i));
  EXPECT_TRUE((*made)->LoadOwned(full).ok());
  return *std::move(made);
}

// Every rank assembles exactly the model's values, gathering only what a layer uses; the
// gathers are the same on every rank and in the ledger.
TEST(FsdpParametersTest, AcquireGathersEachLayersBucketsFromTheOwners) {
  for (int world : {2, 3}) {
    auto comms = MakeGlooRanks(world);
    RunRanks(world, [&](int rank) {
      Mlp model({2, 3, 2}, 7);
      CollectiveLedger ledger;
      auto params = Load(comms[rank].get(), model, SmallPlan(world), &ledger);
      for (size_t k : {0u, 1u, 1u, 0u}) {
        absl::StatusOr<LayerParameters> layer = params->Acquire(k);
        ASSERT_TRUE(layer.ok()) << layer.status();
        EXPECT_TRUE(SameBits(layer->weight, model.param(2 * k), model.parameters()[2 * k].count));
        EXPECT_TRUE(
            SameBits(layer->bias, model.param(2 * k + 1), model.parameters()[2 * k + 1].count));
      }
      ASSERT_TRUE(params->Release().ok());
      // Layer 0: b2; layer 1: b0, b1; layer 1 again: held; layer 0: b2 again.
      const std::vector<CollectiveRecord> records = ledger.TakeWindow();
      ASSERT_EQ(records.size(), 4u);
      const std::vector<int32_t> buckets = {2, 0, 1, 2};
      for (size_t j = 0; j < records.size(); ++j) {
        EXPECT_EQ(records[j].kind, CollectiveKind::kAllGather);
        EXPECT_EQ(records[j].bucket, buckets[j]);
        EXPECT_EQ(records[j].count, params->plan().zero2.slice[buckets[j]]);
      }
      EXPECT_EQ(params->gathers(), 4u);
      EXPECT_EQ(params->staging_peak_elements(), params->plan().staging_elements);
      EXPECT_EQ(params->parameter_bytes(),
                4 * (params->plan().shard_elements() + params->plan().staging_elements));

      absl::StatusOr<std::vector<std::vector<float>>> all = params->GatherAll();
      ASSERT_TRUE(all.ok()) << all.status();
      for (size_t i = 0; i < all->size(); ++i) {
        EXPECT_TRUE(SameBits((*all)[i].data(), model.param(i), model.parameters()[i].count));
      }
      absl::StatusOr<DriftResult> drift = params->MeasureGatheredDrift({});
      ASSERT_TRUE(drift.ok()) << drift.status();
      EXPECT_EQ(drift->max_drift, 0.0);
      EXPECT_EQ(drift->per_parameter.size(), 4u);
      EXPECT_FALSE(params->Acquire(2).ok()) << "no layer 2";
    });
  }
}

// A step on the owned elements only: after it, every rank gathers the owners' new values.
TEST(FsdpParametersTest, OwnedUpdatesReachEveryRankAtTheNextGather) {
  auto comms = MakeGlooRanks(2);
  RunRanks(2, [&](int rank) {
    Mlp model({2, 3, 2}, 7);
    auto params = Load(comms[rank].get(), model, SmallPlan(2), nullptr);
    for (size_t i = 0; i < 4; ++i) {
      const ElementRange owned = params->plan().zero2.shards.owned[rank][i];
      float* p = params->owned_parameter(i);
      ASSERT_EQ(p == nullptr, owned.empty());
      for (size_t e = 0; e < owned.size(); ++e) {
        p[e] = static_cast<float>(100 * i + owned.begin + e);
      }
    }
    absl::StatusOr<std::vector<std::vector<float>>> all = params->GatherAll();
    ASSERT_TRUE(all.ok()) << all.status();
    for (size_t i = 0; i < 4; ++i) {
      for (size_t e = 0; e < (*all)[i].size(); ++e) EXPECT_EQ((*all)[i][e], 100.0f * i + e);
    }
  });
}

// The Mlp through the provider: loss, gradients and evaluation bit-identical to the model with
// its own parameters, on every rank.
TEST(FsdpParametersTest, AnMlpOnGatheredParametersComputesWhatTheWholeModelDoes) {
  auto comms = MakeGlooRanks(2);
  RunRanks(2, [&](int rank) {
    Mlp whole({2, 3, 2}, 11);
    Mlp sharded({2, 3, 2}, 11);
    auto params = Load(comms[rank].get(), sharded, SmallPlan(2), nullptr);
    sharded.ReleaseParameters();
    EXPECT_EQ(sharded.param(0), nullptr);
    const float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f};
    const int32_t y[3] = {1, 0, 1};
    absl::StatusOr<double> a = whole.ForwardBackward(x, y, 3, {});
    BackwardOptions opts;
    opts.params_for = [&](size_t k) { return params->Acquire(k); };
    absl::StatusOr<double> b = sharded.ForwardBackward(x, y, 3, opts);
    ASSERT_TRUE(params->Release().ok());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(SameBits(whole.grad(i), sharded.grad(i), whole.parameters()[i].count)) << i;
    }
    Dataset d;
    d.features = 2;
    d.num_classes = 2;
    d.size = 3;
    d.x.assign(x, x + 6);
    d.y.assign(y, y + 3);
    const Mlp::EvalResult expected = whole.Evaluate(d, 0);
    absl::StatusOr<Mlp::EvalResult> got = sharded.Evaluate(d, 3, opts.params_for);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->loss, expected.loss);
    EXPECT_EQ(got->accuracy, expected.accuracy);
  });
}

// --- The schedule of the gathers, against a channel that logs what it is asked ---

// A world-size-1 channel standing in for a device backend: every call is logged in order
// ("mark 1", "gather b2 after mark 1", "order b2", "wait b2"); a gather's copy lands only when
// its Work is ordered before compute or waited for (a device gather finishes after its issue),
// so compute that read the staging before that would see the wrong values. Buckets in `fail`
// issue fine, but fail when waited for (a peer lost mid-pass).
class LoggingChannel : public Collective {
 public:
  explicit LoggingChannel(std::vector<std::string>* log) : log_(log) {}
  std::set<int> fail;

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "logging"; }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }

  absl::StatusOr<std::shared_ptr<const ComputeMark>> MarkCompute() override {
    auto mark = std::make_shared<Mark>(++marks_);
    log_->push_back(absl::StrCat("mark ", mark->id));
    return std::shared_ptr<const ComputeMark>(mark);
  }
  std::shared_ptr<Work> AllGather(TensorView in, TensorView out,
                                  const CollectiveOptions& opts) override {
    const auto* mark = dynamic_cast<const Mark*>(opts.after.get());
    log_->push_back(absl::StrCat("gather b", opts.bucket, " after ",
                                 mark != nullptr ? absl::StrCat("mark ", mark->id)
                                                 : std::string("all compute")));
    const bool fails = fail.count(opts.bucket) > 0;
    return std::make_shared<LoggedWork>(log_, opts.bucket, fails, [in, out] {
      std::memcpy(out.data, in.data, in.bytes());
    });
  }
  std::shared_ptr<Work> AllReduce(TensorView, ReduceOp, const CollectiveOptions&) override {
    return Unexpected("all-reduce");
  }
  std::shared_ptr<Work> Broadcast(TensorView, int, const CollectiveOptions&) override {
    return Unexpected("broadcast");
  }
  std::shared_ptr<Work> ReduceScatter(TensorView, TensorView, ReduceOp,
                                      const CollectiveOptions&) override {
    return Unexpected("reduce-scatter");
  }
  std::shared_ptr<Work> Barrier(const CollectiveOptions&) override { return Unexpected("barrier"); }
  void Abort(const absl::Status&) override {}
  absl::Status Close(absl::Duration) override { return absl::OkStatus(); }

 private:
  struct Mark : ComputeMark {
    explicit Mark(int id) : id(id) {}
    const int id;
  };
  class LoggedWork : public Work {
   public:
    LoggedWork(std::vector<std::string>* log, int bucket, bool fails, std::function<void()> copy)
        : log_(log), bucket_(bucket), fails_(fails), copy_(std::move(copy)) {}
    absl::Status OrderCompute() override {
      log_->push_back(absl::StrCat("order b", bucket_));
      Land();
      return absl::OkStatus();  // what a device backend knows at this point
    }
    absl::Status Wait() override {
      log_->push_back(absl::StrCat("wait b", bucket_));
      Land();
      return fails_ ? absl::UnavailableError("the peer went away") : absl::OkStatus();
    }
    bool IsDone() const override { return landed_; }
    absl::Duration Duration() const override { return absl::ZeroDuration(); }

   private:
    void Land() {
      if (!landed_ && !fails_) copy_();
      landed_ = true;
    }
    std::vector<std::string>* log_;
    const int bucket_;
    const bool fails_;
    std::function<void()> copy_;
    bool landed_ = false;
  };
  std::shared_ptr<Work> Unexpected(const char* what) {
    log_->push_back(absl::StrCat("unexpected ", what));
    return nullptr;
  }

  std::vector<std::string>* log_;
  int marks_ = 0;
};

// Layers [4, 3, 3, 2], one bucket each: b2 = fc1, b1 = fc2, b0 = fc3 (fsdp_plan.h's example).
FsdpPlan ThreeLayerPlan() {
  BucketLayoutOptions o;
  o.first_bucket_bytes = 32;
  o.bucket_cap_bytes = 32;
  absl::StatusOr<FsdpPlan> plan = PlanFsdp({12, 3, 9, 3, 6, 2}, MlpLayerParameters(3), 1, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

struct Logged {
  std::vector<std::string> log;
  sync_test::FakeCollective comm;  // the reducer's collective: the gathers must not go there
  LoggingChannel channel{&log};
  Mlp model{{4, 3, 3, 2}, 5};
  std::unique_ptr<FsdpParameters> params;

  Logged() {
    FsdpParametersOptions opts;
    opts.gather_channel = &channel;
    absl::StatusOr<std::unique_ptr<FsdpParameters>> made =
        FsdpParameters::Create(&comm, model.parameters(), ThreeLayerPlan(), opts);
    EXPECT_TRUE(made.ok()) << made.status();
    params = *std::move(made);
    std::vector<const float*> full;
    for (size_t i = 0; i < model.parameters().size(); ++i) full.push_back(model.param(i));
    EXPECT_TRUE(params->LoadOwned(full).ok());
  }
  // Acquire(k), logged as "acquire k", and the values the layer's compute would read.
  void Acquire(size_t k) {
    log.push_back(absl::StrCat("acquire ", k));
    absl::StatusOr<LayerParameters> layer = params->Acquire(k);
    ASSERT_TRUE(layer.ok()) << layer.status();
    EXPECT_TRUE(SameBits(layer->weight, model.param(2 * k), model.parameters()[2 * k].count))
        << "layer " << k;
    EXPECT_TRUE(SameBits(layer->bias, model.param(2 * k + 1), model.parameters()[2 * k + 1].count))
        << "layer " << k;
  }
};

// One training pass (the Mlp asks 0, 1, 2, 2, 1): each gather is issued one layer ahead,
// waits only for the pass's compute mark (taken again only after buckets were freed), the
// compute that uses a layer is ordered after its gathers without a host wait, the turn gathers
// nothing, and only Release waits on the host. At most two layers' buckets are held at once.
TEST(FsdpParametersScheduleTest, GathersRunOneLayerAheadAndOnlyReleaseWaits) {
  Logged t;
  const FsdpPlan& plan = t.params->plan();
  const std::vector<size_t> order = {0, 1, 2, 2, 1};
  ASSERT_EQ(plan.access_order, order);
  for (size_t i = 0; i < order.size(); ++i) {
    t.Acquire(order[i]);
    EXPECT_EQ(t.params->held_buckets(), plan.pass[i].held) << "request " << i;
  }
  t.log.push_back("release");
  ASSERT_TRUE(t.params->Release().ok());
  EXPECT_EQ(t.log, (std::vector<std::string>{
                       "acquire 0", "mark 1", "gather b2 after mark 1",  // fc1
                       "gather b1 after mark 1",                         // fc2, prefetched
                       "order b2",                                       // fc1's compute
                       "acquire 1", "mark 2",  // fc1 freed: its staging may be reused
                       "gather b0 after mark 2",  // fc3, prefetched while fc2 computes
                       "order b1",
                       "acquire 2", "order b0",  // fc2 stays held for the backward
                       "acquire 2",
                       "acquire 1",  // frees fc3, gathers nothing
                       "release", "wait b2", "wait b1", "wait b0"}));
  EXPECT_EQ(t.params->gathers(), 3u);
  EXPECT_TRUE(t.params->held_buckets().empty());
  // Two layers at most: fc1 + fc2 (15 + 12) was the most held at once, the arena's size.
  EXPECT_EQ(t.params->staging_peak_elements(), 27u);
  EXPECT_EQ(t.params->staging_peak_elements(), plan.staging_elements);
  EXPECT_EQ(t.params->parameter_bytes(), 4 * (plan.shard_elements() + plan.staging_elements));
  EXPECT_TRUE(t.comm.calls().empty()) << "every gather went to the gather channel";

  // The next pass (after an optimizer step) takes a new mark for its gathers.
  t.log.clear();
  t.Acquire(0);
  EXPECT_EQ(t.log, (std::vector<std::string>{"acquire 0", "mark 3", "gather b2 after mark 3",
                                             "gather b1 after mark 3", "order b2"}));
  ASSERT_TRUE(t.params->Release().ok());
}

// Evaluation asks 0, 1, 2 and ends the pass: the schedule's start, nothing gathered for a
// backward that never comes. A request off the pass (layer 0 where layer 1 was due) falls back
// to that layer's buckets: the prefetched fc2 is ordered before its staging is given up.
TEST(FsdpParametersScheduleTest, EvaluationAndRequestsOffThePass) {
  Logged t;
  for (size_t k : {0u, 1u, 2u}) t.Acquire(k);
  ASSERT_TRUE(t.params->Release().ok());
  EXPECT_EQ(t.params->gathers(), 3u);

  t.log.clear();
  t.Acquire(0);
  t.Acquire(2);
  EXPECT_EQ(t.log, (std::vector<std::string>{
                       "acquire 0", "mark 3", "gather b2 after mark 3", "gather b1 after mark 3",
                       "order b2",
                       "acquire 2",  // off the pass: layer 1 was due
                       "order b1",   // the prefetched fc2, never used, freed
                       "mark 4", "gather b0 after mark 4", "order b0"}));
  EXPECT_EQ(t.params->held_buckets(), (std::vector<size_t>{0}));
  ASSERT_TRUE(t.params->Release().ok());
}

// A gather that fails on the device is reported by Release, naming the bucket and the layer it
// was prefetched for; the buckets are freed all the same.
TEST(FsdpParametersScheduleTest, ReleaseReportsAFailedGather) {
  Logged t;
  t.channel.fail = {0};  // fc3, prefetched while fc2 computes
  for (size_t k : {0u, 1u}) t.Acquire(k);
  absl::StatusOr<LayerParameters> fc3 = t.params->Acquire(2);
  ASSERT_TRUE(fc3.ok()) << "a device backend does not know yet";
  const absl::Status released = t.params->Release();
  EXPECT_EQ(released.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(released.message().find("fsdp parameter gather of bucket 0 (layer 2)"),
            absl::string_view::npos)
      << released;
  EXPECT_TRUE(t.params->held_buckets().empty());
}

}  // namespace
}  // namespace ringleader
