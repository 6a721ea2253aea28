#include "worker/collective/traced_collective.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"

namespace ringleader {
namespace {

using State = TraceRecord::State;

// Two gloo ranks over loopback, each wrapped in its own trace, on one fake clock.
struct TracedPair {
  FakeClock clock;
  std::vector<std::unique_ptr<CollectiveTrace>> traces;
  std::vector<std::unique_ptr<TracedCollective>> ranks;

  TracedPair() {
    GlooOptions opts;
    opts.clock = &clock;
    opts.comm_threads = 1;  // strict issue order: a second operation waits ENQUEUED
    auto made = testing_util::CreateGlooRanks(2, opts);
    for (auto& r : made) {
      EXPECT_TRUE(r.ok()) << r.status();
      traces.push_back(std::make_unique<CollectiveTrace>(&clock, /*capacity=*/4));
      ranks.push_back(std::make_unique<TracedCollective>(std::move(*r), traces.back().get()));
    }
  }
};

// Spins until `rank`'s entry `index` (in its snapshot) is in `state`: the backend's thread moves
// it there on its own, and there is no event to wait on.
void AwaitState(const CollectiveTrace& trace, size_t index, State state) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const std::vector<TraceRecord> snap = trace.Snapshot();
    if (snap.size() > index && snap[index].state == state) return;
    std::this_thread::yield();
  }
  FAIL() << "entry " << index << " never reached state " << TraceStateName(state);
}

TEST(TracedCollectiveTest, RecordsWhatEachRankIssuedAndWhereItIs) {
  testing_util::Watchdog watchdog(absl::Seconds(60), "traced collective test");
  TracedPair pair;
  std::vector<float> a0(8, 1.0f), a1(8, 2.0f), b0(8, 1.0f), b1(8, 2.0f);
  CollectiveOptions bucket3;
  bucket3.bucket = 3;
  pair.traces[0]->SetStep(7);
  // Rank 0 enters two all-reduces; rank 1 has not issued anything yet.
  auto w0 = pair.ranks[0]->AllReduce({a0.data(), a0.size(), DataType::kFloat32}, ReduceOp::kSum,
                                     bucket3);
  auto w1 = pair.ranks[0]->AllReduce({b0.data(), b0.size(), DataType::kFloat32}, ReduceOp::kSum);
  AwaitState(*pair.traces[0], 0, State::kStarted);

  std::vector<TraceRecord> snap = pair.traces[0]->Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].sequence, 0u);
  EXPECT_EQ(snap[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(snap[0].bucket, 3);
  EXPECT_EQ(snap[0].bytes, 32u);
  EXPECT_EQ(snap[0].step, 7u);
  EXPECT_EQ(snap[1].state, State::kEnqueued);  // queued behind #0 on the one comm thread
  EXPECT_EQ(pair.traces[0]->issued(), 2u);
  EXPECT_EQ(pair.traces[0]->completed(), 0u);
  EXPECT_EQ(pair.traces[1]->issued(), 0u);

  // Rank 0 waits 40 ms (fake) for rank 1 to arrive; rank 1 arrives last and waits for nobody.
  pair.clock.Advance(absl::Milliseconds(40));
  auto v0 = pair.ranks[1]->AllReduce({a1.data(), a1.size(), DataType::kFloat32}, ReduceOp::kSum,
                                     bucket3);
  auto v1 = pair.ranks[1]->AllReduce({b1.data(), b1.size(), DataType::kFloat32}, ReduceOp::kSum);
  for (auto* w : {&w0, &w1, &v0, &v1}) ASSERT_TRUE((*w)->Wait().ok());
  EXPECT_EQ(a0[0], 3.0f);

  EXPECT_EQ(pair.traces[0]->completed(), 2u);
  const std::vector<absl::Duration> early = pair.traces[0]->DurationsSince(0, 16);
  const std::vector<absl::Duration> late = pair.traces[1]->DurationsSince(0, 16);
  ASSERT_EQ(early.size(), 2u);
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(early[0], absl::Milliseconds(40));
  EXPECT_EQ(late[0], absl::ZeroDuration());
  snap = pair.traces[0]->Snapshot();
  EXPECT_EQ(snap[0].state, State::kCompleted);
  ASSERT_TRUE(snap[0].started.has_value() && snap[0].completed.has_value());
  EXPECT_EQ(*snap[0].completed - *snap[0].started, absl::Milliseconds(40));
}

TEST(TracedCollectiveTest, TheRingKeepsTheNewestEntries) {
  testing_util::Watchdog watchdog(absl::Seconds(60), "traced collective ring test");
  TracedPair pair;
  testing_util::ForEachRankInParallel(2, [&](int rank) {
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(pair.ranks[rank]->Barrier()->Wait().ok());
  });
  const std::vector<TraceRecord> snap = pair.traces[0]->Snapshot();
  ASSERT_EQ(snap.size(), 4u);  // capacity 4
  EXPECT_EQ(snap.front().sequence, 2u);
  EXPECT_EQ(snap.back().sequence, 5u);
  EXPECT_EQ(snap.back().kind, CollectiveKind::kBarrier);
  EXPECT_EQ(pair.traces[0]->completed(), 6u);
  // Evicted entries have no durations left.
  EXPECT_TRUE(pair.traces[0]->DurationsSince(0, 16).empty());
  EXPECT_EQ(pair.traces[0]->DurationsSince(3, 2).size(), 2u);
}

// A world of one whose operations are done at once; with a side channel when given one (owned).
class OneRank : public Collective {
 public:
  struct Done : Work {
    absl::Status Wait() override { return absl::OkStatus(); }
    bool IsDone() const override { return true; }
    absl::Duration Duration() const override { return absl::ZeroDuration(); }
  };
  struct Mark : ComputeMark {};
  explicit OneRank(std::unique_ptr<OneRank> side = nullptr) : side_(std::move(side)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "one"; }
  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
  std::shared_ptr<Work> AllReduce(TensorView, ReduceOp, const CollectiveOptions&) override {
    return std::make_shared<Done>();
  }
  std::shared_ptr<Work> Broadcast(TensorView, int, const CollectiveOptions&) override {
    return std::make_shared<Done>();
  }
  std::shared_ptr<Work> AllGather(TensorView, TensorView, const CollectiveOptions&) override {
    return std::make_shared<Done>();
  }
  std::shared_ptr<Work> ReduceScatter(TensorView, TensorView, ReduceOp,
                                      const CollectiveOptions&) override {
    return std::make_shared<Done>();
  }
  std::shared_ptr<Work> Barrier(const CollectiveOptions&) override {
    return std::make_shared<Done>();
  }
  absl::StatusOr<std::shared_ptr<const ComputeMark>> MarkCompute() override { return mark; }
  Collective* side_channel() override { return side_.get(); }
  void Abort(const absl::Status&) override {}
  absl::Status Close(absl::Duration) override { return absl::OkStatus(); }

  const std::shared_ptr<const ComputeMark> mark = std::make_shared<Mark>();

 private:
  std::unique_ptr<OneRank> side_;
};

// The backend's side channel is traced into the same ring, in issue order; marks come from
// the backend.
TEST(TracedCollectiveTest, TheSideChannelIsTracedIntoTheSameRing) {
  auto side = std::make_unique<OneRank>();
  OneRank* backend_side = side.get();
  auto backend = std::make_unique<OneRank>(std::move(side));
  const std::shared_ptr<const ComputeMark> mark = backend->mark;
  CollectiveTrace trace;
  TracedCollective traced(std::move(backend), &trace);
  Collective* traced_side = traced.side_channel();
  ASSERT_NE(traced_side, nullptr);
  EXPECT_NE(traced_side, backend_side) << "wrapped, so its operations are traced";
  EXPECT_EQ(*traced.MarkCompute(), mark);
  float x[2] = {};
  ASSERT_TRUE(traced.ReduceScatter({x, 2}, {x, 2}, ReduceOp::kAvg, {})->Wait().ok());
  CollectiveOptions gather;
  gather.bucket = 7;
  ASSERT_TRUE(traced_side->AllGather({x, 1}, {x, 1}, gather)->Wait().ok());
  const std::vector<TraceRecord> snap = trace.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(snap[1].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(snap[1].sequence, 1u);
  EXPECT_EQ(snap[1].bucket, 7);
  EXPECT_EQ(traced_side->side_channel(), nullptr);

  TracedCollective plain(std::make_unique<OneRank>(), &trace);
  EXPECT_EQ(plain.side_channel(), nullptr);
}

}  // namespace
}  // namespace ringleader
