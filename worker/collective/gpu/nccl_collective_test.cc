// NcclCollective's control flow (unique-id relay, non-blocking init, stream ordering, Work
// completion, deadlines, asynchronous errors, Abort) against FakeNcclRuntime: no GPU needed.
// Time is a FakeClock that the collective's "sleep" advances, so deadlines pass without waiting.
#include "worker/collective/gpu/nccl_collective.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/gpu/gpu_devices.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gpu/fake_nccl_runtime.h"
#include "worker/collective/gpu/nccl_unique_id.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/rank_threads.h"

namespace ringleader {
namespace gpu {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

const cudaStream_t kComputeStream = reinterpret_cast<cudaStream_t>(uintptr_t{0x77});

class NcclCollectiveTest : public ::testing::Test {
 protected:
  NcclOptions Options(std::shared_ptr<FakeNcclRuntime> runtime) {
    NcclOptions o;
    o.init_timeout = absl::Seconds(10);
    o.collective_timeout = absl::Seconds(5);
    o.poll_interval = absl::Milliseconds(10);
    o.compute_stream = kComputeStream;
    o.clock = &clock_;
    o.sleep = [this](absl::Duration d) { clock_.Advance(d); };
    o.runtime = std::move(runtime);
    return o;
  }

  // Rank 0 of a world of one: the whole relay and init run on the calling thread. The calls
  // creation made (the warm-up all-reduce among them) are forgotten, so tests see their own.
  std::unique_ptr<Collective> CreateAlone() {
    auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, Options(runtime_));
    EXPECT_TRUE(c.ok()) << c.status();
    runtime_->ClearObservations();
    return c.ok() ? std::move(*c) : nullptr;
  }

  float buf_[16] = {};
  FakeClock clock_;
  std::shared_ptr<InMemoryKeyValueStore> store_ = std::make_shared<InMemoryKeyValueStore>();
  std::shared_ptr<FakeNcclRuntime> runtime_ = std::make_shared<FakeNcclRuntime>();
};

TEST_F(NcclCollectiveTest, CreateRelaysTheIdAndInitsANonBlockingCommunicator) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->backend_name(), "nccl");
  EXPECT_EQ(c->memory_kind(), MemoryKind::kDevice);
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(runtime_->last_init_blocking(), 0);
  EXPECT_EQ(runtime_->last_init_nranks(), 1);
  auto stored = store_->Get("job/3/nccl/unique_id", absl::ZeroDuration());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, runtime_->last_init_id());
  EXPECT_TRUE(store_->Get(NcclStartedKey("job/3/", 0), absl::ZeroDuration()).ok());
  EXPECT_TRUE(store_->Get(NcclJoinedKey("job/3/", 0), absl::ZeroDuration()).ok());
  EXPECT_EQ(runtime_->abort_calls(), 0);
}

TEST_F(NcclCollectiveTest, ThreeRanksAgreeOnOneIdAndAllJoin) {
  constexpr int kWorld = 3;
  std::vector<std::shared_ptr<FakeNcclRuntime>> runtimes;
  for (int r = 0; r < kWorld; ++r) runtimes.push_back(std::make_shared<FakeNcclRuntime>());
  std::vector<absl::Status> results(kWorld);
  std::vector<std::unique_ptr<Collective>> collectives(kWorld);
  RunRanks(kWorld, [&](int rank) {
    auto c = CreateNcclCollective(store_, "job/9/", rank, kWorld, rank, Options(runtimes[rank]));
    results[rank] = c.status();
    if (c.ok()) collectives[rank] = std::move(*c);
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    EXPECT_EQ(runtimes[r]->last_init_rank(), r);
    EXPECT_EQ(runtimes[r]->last_init_nranks(), kWorld);
    EXPECT_EQ(runtimes[r]->last_init_id(), runtimes[0]->last_init_id());
    EXPECT_TRUE(store_->Get(NcclJoinedKey("job/9/", r), absl::ZeroDuration()).ok());
  }
  // Only rank 0 made an id.
  EXPECT_EQ(runtimes[1]->calls().front(), "SetDevice(1)");
  EXPECT_THAT(runtimes[0]->calls(), ::testing::Contains("GetUniqueId"));
  EXPECT_THAT(runtimes[1]->calls(), ::testing::Not(::testing::Contains("GetUniqueId")));
}

TEST_F(NcclCollectiveTest, AllReduceWaitsForTheComputeStreamThenRunsOnTheCommStream) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  const uintptr_t comm_stream = FakeNcclRuntime::Id(runtime_->created_stream());
  const size_t calls_before = runtime_->calls().size();
  auto work = c->AllReduce({buf_, 16, DataType::kFloat32}, ReduceOp::kAvg);
  ASSERT_TRUE(work->Wait().ok());

  const std::vector<FakeNcclRuntime::Op> ops = runtime_->ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, "AllReduce");
  EXPECT_EQ(ops[0].type, ncclFloat32);
  EXPECT_EQ(ops[0].op, ncclAvg);
  EXPECT_EQ(ops[0].count, 16u);
  EXPECT_EQ(ops[0].send, buf_);
  EXPECT_EQ(ops[0].recv, buf_);
  EXPECT_EQ(FakeNcclRuntime::Id(ops[0].stream), comm_stream);

  // Order: event on the compute stream, comm stream waits for it, the NCCL call, the enqueue
  // finishes (async state leaves "in progress" = 7), and only then the completion event.
  std::vector<std::string> calls = runtime_->calls();
  calls.erase(calls.begin(), calls.begin() + calls_before);
  const auto at = [&](const std::string& prefix) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const std::string& s) { return s.rfind(prefix, 0) == 0; }) -
           calls.begin();
  };
  const auto compute_record = at(absl::StrCat("EventRecord(event"));
  ASSERT_LT(compute_record, static_cast<long>(calls.size()));
  EXPECT_THAT(calls[compute_record], HasSubstr(absl::StrCat("stream ", 0x77, ")")));
  const auto wait = at(absl::StrCat("StreamWaitEvent(stream ", comm_stream));
  const auto nccl = at("AllReduce");
  const auto enqueued = at("CommGetAsyncError -> 0");
  EXPECT_LT(compute_record, wait);
  EXPECT_LT(wait, nccl);
  EXPECT_LT(nccl, enqueued);
  long last_record = -1;
  for (long i = 0; i < static_cast<long>(calls.size()); ++i) {
    if (calls[i].rfind("EventRecord(", 0) == 0 &&
        calls[i].find(absl::StrCat("stream ", comm_stream, ")")) != std::string::npos) {
      last_record = i;
    }
  }
  EXPECT_GT(last_record, enqueued) << "completion event recorded before NCCL enqueued the op";
}

TEST_F(NcclCollectiveTest, DataTypesAndOpsMapToNccl) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  uint16_t bf[4] = {};
  uint8_t bytes[8] = {};
  ASSERT_TRUE(c->AllReduce({bf, 4, DataType::kBFloat16}, ReduceOp::kSum)->Wait().ok());
  ASSERT_TRUE(c->AllReduce({bytes, 8, DataType::kUInt8}, ReduceOp::kMax)->Wait().ok());
  ASSERT_TRUE(c->Broadcast({buf_, 16, DataType::kFloat32}, 0)->Wait().ok());
  ASSERT_TRUE(
      c->AllGather({buf_, 16, DataType::kFloat32}, {buf_, 16, DataType::kFloat32})->Wait().ok());
  ASSERT_TRUE(c->ReduceScatter({buf_, 16, DataType::kFloat32}, {buf_, 16, DataType::kFloat32},
                               ReduceOp::kSum)
                  ->Wait()
                  .ok());
  ASSERT_TRUE(c->Barrier()->Wait().ok());
  const std::vector<FakeNcclRuntime::Op> ops = runtime_->ops();
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[0].type, ncclBfloat16);
  EXPECT_EQ(ops[0].op, ncclSum);
  EXPECT_EQ(ops[1].type, ncclUint8);
  EXPECT_EQ(ops[1].op, ncclMax);
  EXPECT_EQ(ops[2].kind, "Broadcast");
  EXPECT_EQ(ops[2].root, 0);
  EXPECT_EQ(ops[3].kind, "AllGather");
  EXPECT_EQ(ops[4].kind, "ReduceScatter");
  EXPECT_EQ(ops[5].kind, "AllReduce");  // the barrier
  EXPECT_EQ(ops[5].count, 1u);
  EXPECT_NE(ops[5].recv, nullptr);
}

TEST_F(NcclCollectiveTest, BadArgumentsAreRefusedAndTheCollectiveStaysLive) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  uint8_t bytes[4] = {};
  const absl::Status avg_u8 = c->AllReduce({bytes, 4, DataType::kUInt8}, ReduceOp::kAvg)->Wait();
  EXPECT_EQ(avg_u8.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Broadcast({buf_, 4, DataType::kFloat32}, 1)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status gather =
      c->AllGather({buf_, 4, DataType::kFloat32}, {buf_, 5, DataType::kFloat32})->Wait();
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(gather.message()), HasSubstr("out must hold world_size (1) x in.count"));
  EXPECT_EQ(c->AllReduce({nullptr, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(runtime_->ops().empty());
  EXPECT_TRUE(c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(runtime_->abort_calls(), 0);
}

TEST_F(NcclCollectiveTest, AWorkPastItsDeadlineAbortsTheCommunicatorAndKillsTheCollective) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);  // the peer never shows up: the op never finishes
  CollectiveOptions opts;
  opts.timeout = absl::Seconds(2);
  opts.bucket = 4;
  const absl::Time start = clock_.Now();
  auto work = c->AllReduce({buf_, 16, DataType::kFloat32}, ReduceOp::kSum, opts);
  EXPECT_FALSE(work->IsDone());
  const absl::Status s = work->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 0: NCCL all-reduce(sum) #0 of bucket 4 (16 x fp32) did not finish "
                        "within 2s"));
  EXPECT_EQ(FailureOf(s).kind(), v1::RankFailure::PEER_TIMED_OUT);
  EXPECT_GE(clock_.Now() - start, absl::Seconds(2));
  EXPECT_LT(clock_.Now() - start, absl::Seconds(3));
  EXPECT_TRUE(work->IsDone());
  EXPECT_EQ(work->Wait(), s);
  EXPECT_EQ(runtime_->abort_calls(), 1);
  // Dead: later calls fail at once with the same status, without touching NCCL.
  const size_t ops = runtime_->ops().size();
  EXPECT_EQ(c->Barrier()->Wait(), s);
  EXPECT_EQ(runtime_->ops().size(), ops);
  c->Abort(absl::CancelledError("late"));
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

TEST_F(NcclCollectiveTest, IsDoneAloneNoticesTheDeadline) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  auto work = c->Barrier();
  EXPECT_FALSE(work->IsDone());
  clock_.Advance(absl::Seconds(6));
  EXPECT_TRUE(work->IsDone());
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

TEST_F(NcclCollectiveTest, AbortFailsPendingAndLaterWorkWithAbortedOnceAndIsIdempotent) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  auto first = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  auto second = c->Broadcast({buf_ + 8, 8, DataType::kFloat32}, 0);
  EXPECT_FALSE(first->IsDone());
  c->Abort(absl::UnavailableError("coordinator: rank 3 died"));
  c->Abort(absl::UnavailableError("again"));
  EXPECT_EQ(runtime_->abort_calls(), 1);
  for (const auto& work : {first, second}) {
    EXPECT_TRUE(work->IsDone());
    const absl::Status s = work->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_THAT(std::string(s.message()), HasSubstr("coordinator: rank 3 died"));
    EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("again")));
  }
  EXPECT_EQ(c->Barrier()->Wait().code(), absl::StatusCode::kAborted);
  // Events completing after the abort do not resurrect the work.
  runtime_->CompleteEvents();
  EXPECT_EQ(first->Wait().code(), absl::StatusCode::kAborted);
}

// An aborted NCCL kernel may still write its buffer when ncclCommAbort returns: Abort drains the
// communication stream before it returns (and before any Work reports the failure), so the
// caller may free the buffers (the reducer's arenas) as soon as it has seen the failure.
TEST_F(NcclCollectiveTest, AbortReturnsOnlyOnceTheCommStreamHasDrained) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  const uintptr_t comm_stream = FakeNcclRuntime::Id(runtime_->created_stream());
  runtime_->set_events_complete(false);
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  runtime_->set_stream_busy_polls(3);  // the aborted kernel takes three polls to stop
  const absl::Time start = clock_.Now();
  c->Abort(absl::UnavailableError("coordinator: stop"));
  const std::vector<std::string> calls = runtime_->calls();
  const auto abort = std::find(calls.begin(), calls.end(), "CommAbort");
  ASSERT_NE(abort, calls.end());
  const std::string busy = absl::StrCat("StreamQuery(stream ", comm_stream, ") -> ",
                                        static_cast<int>(cudaErrorNotReady));
  const std::string idle = absl::StrCat("StreamQuery(stream ", comm_stream, ") -> 0");
  EXPECT_EQ(std::count(calls.begin(), abort, busy), 0) << "no drain before the abort";
  EXPECT_EQ(std::count(abort, calls.end(), busy), 3);
  ASSERT_EQ(calls.back(), idle) << "Abort returned before the stream drained";
  EXPECT_GT(clock_.Now(), start) << "it waited between the polls";
  const absl::Status s = work->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("coordinator: stop"));
  EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("did not drain")));
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

// Another thread's Work that notices the dead communicator while the abort is still draining
// fails only once the drain is over (it would otherwise hand the caller a buffer an aborted
// kernel may still write).
TEST_F(NcclCollectiveTest, AWorkSeeingAnotherThreadsAbortFailsOnlyAfterTheDrain) {
  NcclOptions o = Options(runtime_);
  // Real (short) sleeps and a clock that stands still: no deadline passes while the test waits.
  o.sleep = [](absl::Duration) { absl::SleepFor(absl::Milliseconds(1)); };
  auto created = CreateNcclCollective(store_, "job/3/", 0, 1, 0, o);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Collective> c = std::move(*created);
  runtime_->set_events_complete(false);
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  runtime_->set_stream_busy_polls(-1);  // the aborted kernel runs until DrainStreams()
  std::thread aborter([&] { c->Abort(absl::UnavailableError("coordinator: stop")); });
  runtime_->AwaitAbortCall();
  absl::Notification failed;
  absl::Status seen;
  std::thread waiter([&] {
    seen = work->Wait();
    failed.Notify();
  });
  EXPECT_FALSE(failed.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "the Work failed while the aborted kernel could still write its buffer: " << seen;
  runtime_->DrainStreams();
  aborter.join();
  waiter.join();
  EXPECT_EQ(seen.code(), absl::StatusCode::kAborted) << seen;
  EXPECT_THAT(std::string(seen.message()), HasSubstr("coordinator: stop"));
}

TEST_F(NcclCollectiveTest, AStreamThatNeverDrainsEndsTheAbortAfterTheCollectiveTimeout) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  runtime_->set_stream_busy_polls(-1);
  const absl::Time start = clock_.Now();
  c->Abort(absl::UnavailableError("coordinator: stop"));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(5));  // Options' collective_timeout
  EXPECT_LE(clock_.Now() - start, absl::Seconds(5) + absl::Milliseconds(10));
  const absl::Status s = work->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("coordinator: stop"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("after the abort, the communication stream did not drain within 5s"));
  EXPECT_EQ(c->Barrier()->Wait(), s) << "later calls fail with the same status";
}

// The barrier (and the warm-up) all-reduce one float: zeroed on the communication stream before
// the first of them, never sent uninitialised.
TEST_F(NcclCollectiveTest, TheBarrierBufferIsZeroedOnTheCommStreamBeforeTheWarmUp) {
  auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, Options(runtime_));
  ASSERT_TRUE(c.ok()) << c.status();
  const uintptr_t comm_stream = FakeNcclRuntime::Id(runtime_->created_stream());
  const std::vector<FakeNcclRuntime::Op> ops = runtime_->ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].count, 1u);
  const std::vector<std::string> calls = runtime_->calls();
  const auto zeroed = std::find(calls.begin(), calls.end(),
                                absl::StrCat("MemsetAsync(stream ", comm_stream, ", value 0, 4 bytes)"));
  const auto warm_up = std::find(calls.begin(), calls.end(), "AllReduce");
  ASSERT_NE(zeroed, calls.end());
  EXPECT_LT(zeroed, warm_up);
  // The fake's Malloc leaves 0xFF bytes (a NaN) where nothing was written.
  float value = 1.0f;
  std::memcpy(&value, ops[0].recv, sizeof(value));
  EXPECT_EQ(value, 0.0f);
  ASSERT_TRUE((*c)->Barrier()->Wait().ok());
  EXPECT_EQ(runtime_->ops().back().recv, ops[0].recv) << "the barrier reduces the same buffer";
}

TEST_F(NcclCollectiveTest, AnAsynchronousNcclErrorFailsTheWorkAsUnavailable) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  runtime_->SetAsyncError(ncclRemoteError);
  const absl::Status s = work->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("all-reduce(sum) #0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(ncclGetErrorString(ncclRemoteError)));
  EXPECT_EQ(FailureOf(s).kind(), v1::RankFailure::PEER_CLOSED);
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

TEST_F(NcclCollectiveTest, AFailingNcclCallFailsTheWorkAtOnce) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_op_result(ncclSystemError);
  const absl::Status s = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ncclAllReduce failed at"));
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

TEST_F(NcclCollectiveTest, WorkDurationIsTheTimeFromIssueToCompletion) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  const absl::Time issued = clock_.Now();
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  EXPECT_EQ(work->Duration(), absl::ZeroDuration());
  clock_.Advance(absl::Milliseconds(250));
  runtime_->CompleteEvents();
  ASSERT_TRUE(work->Wait().ok());
  // From issue (including NCCL's enqueue, one poll here) to the completion Wait observed.
  EXPECT_EQ(work->Duration(), clock_.Now() - issued);
  EXPECT_GE(work->Duration(), absl::Milliseconds(250));
}

TEST_F(NcclCollectiveTest, DestroyingTheCollectiveAbortsAndReleasesEverything) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);
  auto work = c->AllReduce({buf_, 8, DataType::kFloat32}, ReduceOp::kSum);
  EXPECT_EQ(runtime_->live_streams(), 1);
  EXPECT_EQ(runtime_->live_allocations(), 1);
  c.reset();
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->live_streams(), 0);
  EXPECT_EQ(runtime_->live_allocations(), 0);
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kAborted);
}

// NCCL 2.28 connects lazily by default: the warm-up all-reduce connects the ranks inside the
// init deadline, before the rank says it joined, so the first bucket never pays for it.
TEST_F(NcclCollectiveTest, CreateConnectsTheRanksWithAWarmUpAllReduceBeforeJoining) {
  auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, Options(runtime_));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<FakeNcclRuntime::Op> ops = runtime_->ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, "AllReduce");
  EXPECT_EQ(ops[0].count, 1u);
  EXPECT_EQ(ops[0].stream, runtime_->created_stream());
  const std::vector<std::string> calls = runtime_->calls();
  const auto init = std::find(calls.begin(), calls.end(), "CommInitRankConfig");
  const auto warm_up = std::find(calls.begin(), calls.end(), "AllReduce");
  EXPECT_LT(init, warm_up);
  EXPECT_NE(warm_up, calls.end());
  EXPECT_EQ(runtime_->abort_calls(), 0);
  // User operations are numbered from #0 after the warm-up.
  runtime_->set_events_complete(false);
  CollectiveOptions opts;
  opts.timeout = absl::Milliseconds(50);
  const absl::Status s =
      (*c)->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum, opts)->Wait();
  EXPECT_THAT(std::string(s.message()), HasSubstr("all-reduce(sum) #0 "));
}

TEST_F(NcclCollectiveTest, AWarmUpThatNeverCompletesFailsCreateWithinTheInitDeadline) {
  runtime_->set_events_complete(false);  // the peers never connect
  const absl::Time start = clock_.Now();
  auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, Options(runtime_));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("connecting to the other ranks"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("connection warm-up"));
  EXPECT_LE(clock_.Now() - start, absl::Seconds(10) + absl::Milliseconds(20));  // init_timeout
  EXPECT_FALSE(store_->Get(NcclJoinedKey("job/3/", 0), absl::ZeroDuration()).ok());
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->live_streams(), 0);
  EXPECT_EQ(runtime_->live_allocations(), 0);
}

// The job's operation kinds, each at its size, inside the init deadline: NCCL connects each
// algorithm the first time an operation selects it, by kind and size. Reduce-scatter and
// all-gather run in place on one scratch buffer as large as the largest operation, zeroed on the
// communication stream first and freed after.
TEST_F(NcclCollectiveTest, TheWarmUpIssuesEachListedOperationAtItsSize) {
  constexpr int kWorld = 2;
  std::vector<std::shared_ptr<FakeNcclRuntime>> runtimes;
  for (int r = 0; r < kWorld; ++r) runtimes.push_back(std::make_shared<FakeNcclRuntime>());
  std::vector<absl::Status> results(kWorld);
  std::vector<std::unique_ptr<Collective>> collectives(kWorld);
  RunRanks(kWorld, [&](int rank) {
    NcclOptions o = Options(runtimes[rank]);
    o.warm_up = {
        {CollectiveKind::kAllReduce, 1000, DataType::kBFloat16, ReduceOp::kAvg},
        {CollectiveKind::kReduceScatter, 1001, DataType::kFloat32, ReduceOp::kAvg},  // -> 1002
        {CollectiveKind::kAllGather, 7, DataType::kUInt8, ReduceOp::kSum},             // -> 8
        {CollectiveKind::kBroadcast, 50, DataType::kFloat32, ReduceOp::kSum},
    };
    auto c = CreateNcclCollective(store_, "job/7/", rank, kWorld, rank, o);
    results[rank] = c.status();
    if (c.ok()) collectives[rank] = std::move(*c);
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    FakeNcclRuntime& rt = *runtimes[r];
    const std::vector<FakeNcclRuntime::Op> ops = rt.ops();
    ASSERT_EQ(ops.size(), 5u) << "rank " << r;
    for (const FakeNcclRuntime::Op& op : ops) EXPECT_EQ(op.stream, rt.created_stream());
    // The one-float all-reduce first (what small operations and the barrier use).
    EXPECT_EQ(ops[0].kind, "AllReduce");
    EXPECT_EQ(ops[0].count, 1u);
    // Then the listed ones, in order, at their sizes, types and ops.
    EXPECT_EQ(ops[1].kind, "AllReduce");
    EXPECT_EQ(ops[1].count, 1000u);
    EXPECT_EQ(ops[1].type, ncclBfloat16);
    EXPECT_EQ(ops[1].op, ncclAvg);
    const char* scratch = static_cast<const char*>(ops[1].send);
    EXPECT_EQ(ops[2].kind, "ReduceScatter");
    EXPECT_EQ(ops[2].count, 501u);  // recv count: 1002 / 2
    EXPECT_EQ(ops[2].type, ncclFloat32);
    EXPECT_EQ(ops[2].op, ncclAvg);
    EXPECT_EQ(ops[2].send, scratch);
    EXPECT_EQ(ops[2].recv, scratch + r * 501 * sizeof(float)) << "in place";
    EXPECT_EQ(ops[3].kind, "AllGather");
    EXPECT_EQ(ops[3].count, 4u);  // send count: 8 / 2
    EXPECT_EQ(ops[3].type, ncclUint8);
    EXPECT_EQ(ops[3].recv, scratch);
    EXPECT_EQ(ops[3].send, scratch + r * 4) << "in place";
    EXPECT_EQ(ops[4].kind, "Broadcast");
    EXPECT_EQ(ops[4].count, 50u);
    EXPECT_EQ(ops[4].root, 0);
    EXPECT_EQ(ops[4].recv, scratch);
    // One scratch buffer, the largest operation's size (1002 floats), zeroed before the first
    // listed operation, freed again: only the barrier's buffer is left.
    EXPECT_EQ(rt.largest_allocation(), 1002 * sizeof(float));
    const std::vector<std::string> calls = rt.calls();
    const auto zeroed =
        std::find(calls.begin(), calls.end(),
                  absl::StrCat("MemsetAsync(stream ", FakeNcclRuntime::Id(rt.created_stream()),
                               ", value 0, ", 1002 * sizeof(float), " bytes)"));
    const auto first_listed =
        std::find(std::find(calls.begin(), calls.end(), "AllReduce") + 1, calls.end(), "AllReduce");
    ASSERT_NE(zeroed, calls.end()) << "the scratch buffer is never zeroed";
    EXPECT_LT(zeroed, first_listed);
    EXPECT_EQ(rt.live_allocations(), 1);
    EXPECT_EQ(rt.abort_calls(), 0);
    EXPECT_TRUE(store_->Get(NcclJoinedKey("job/7/", r), absl::ZeroDuration()).ok());
  }
  // The job's own operations are numbered from #0 again.
  runtimes[0]->set_events_complete(false);
  CollectiveOptions opts;
  opts.timeout = absl::Milliseconds(50);
  const absl::Status s =
      collectives[0]->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum, opts)->Wait();
  EXPECT_THAT(std::string(s.message()), HasSubstr("all-reduce(sum) #0 "));
}

TEST_F(NcclCollectiveTest, AWarmUpOperationThatNeverCompletesFailsCreateNamingIt) {
  runtime_->set_ops_that_complete(1);  // the one-float all-reduce; the peer never joins the next
  NcclOptions o = Options(runtime_);
  o.warm_up = {{CollectiveKind::kReduceScatter, 64, DataType::kFloat32, ReduceOp::kAvg}};
  const absl::Time start = clock_.Now();
  auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, o);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("connecting to the other ranks"));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("connection warm-up reduce-scatter(avg) #1 (64 x fp32)"));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(10));  // the init deadline, not the op timeout
  EXPECT_LE(clock_.Now() - start, absl::Seconds(10) + absl::Milliseconds(20));
  EXPECT_FALSE(store_->Get(NcclJoinedKey("job/3/", 0), absl::ZeroDuration()).ok());
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->live_allocations(), 0) << "the scratch buffer is freed on failure too";
  EXPECT_EQ(runtime_->live_streams(), 0);
}

TEST_F(NcclCollectiveTest, ABadWarmUpOperationIsRefusedBeforeAnyCall) {
  for (const WarmUpOperation& bad : std::vector<WarmUpOperation>{
           {CollectiveKind::kBarrier, 1, DataType::kFloat32, ReduceOp::kSum},
           {CollectiveKind::kAllReduce, 0, DataType::kFloat32, ReduceOp::kSum},
           {CollectiveKind::kReduceScatter, 8, DataType::kUInt8, ReduceOp::kAvg},
       }) {
    NcclOptions o = Options(runtime_);
    o.warm_up = {{CollectiveKind::kAllGather, 4, DataType::kFloat32, ReduceOp::kSum}, bad};
    const absl::Status s = CreateNcclCollective(store_, "job/3/", 0, 1, 0, o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("NcclOptions::warm_up[1]"));
  }
  EXPECT_TRUE(runtime_->calls().empty());
}

// Each operation takes two events (compute-stream order, completion); they come from the
// communicator's pool and go back when the Work is destroyed, so steady state creates none.
TEST_F(NcclCollectiveTest, OperationsReuseTheirEventsInsteadOfCreatingThem) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  const int after_create = runtime_->event_creations();
  EXPECT_LE(after_create, 2) << "the warm-up all-reduce: one order event, one completion event";
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(c->AllReduce({buf_, 16, DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());
  }
  EXPECT_EQ(runtime_->event_creations(), after_create) << "100 operations created events";
  // Works held at once each hold their completion event; the pool grows to that many, once.
  std::vector<std::shared_ptr<Work>> held;
  for (int i = 0; i < 10; ++i) {
    held.push_back(c->AllReduce({buf_ + i, 1, DataType::kFloat32}, ReduceOp::kSum));
  }
  for (const auto& work : held) ASSERT_TRUE(work->Wait().ok());
  const int after_ten = runtime_->event_creations();
  EXPECT_LE(after_ten, 11);
  held.clear();
  for (int i = 0; i < 10; ++i) {
    held.push_back(c->AllReduce({buf_ + i, 1, DataType::kFloat32}, ReduceOp::kSum));
  }
  for (const auto& work : held) ASSERT_TRUE(work->Wait().ok());
  EXPECT_EQ(runtime_->event_creations(), after_ten);
  // Every event is destroyed once the Collective and the last Work are gone, in either order.
  c.reset();
  EXPECT_GT(runtime_->live_events(), 0) << "the held Works still use theirs";
  held.clear();
  EXPECT_EQ(runtime_->live_events(), 0);
}

TEST_F(NcclCollectiveTest, ThePoolIsSharedSafelyByThreadsIssuingAndWaiting) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  constexpr int kThreads = 4;
  constexpr int kOps = 200;
  std::vector<float> bufs(kThreads);
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        auto work = c->AllReduce({&bufs[t], 1, DataType::kFloat32}, ReduceOp::kSum);
        if (!work->Wait().ok()) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  // At most every thread's completion event plus an order event in use at once.
  EXPECT_LE(runtime_->event_creations(), 2 * kThreads + 2);
  c.reset();
  EXPECT_EQ(runtime_->live_events(), 0);
}

// No fixed sleep between polls: an operation that finishes within a few polls is seen without
// sleeping at all (the wait spins first), a long one with sleeps growing to poll_interval.
TEST_F(NcclCollectiveTest, AWaitSpinsFirstThenBacksOffUpToThePollInterval) {
  std::vector<absl::Duration> sleeps;
  NcclOptions o = Options(runtime_);
  o.sleep = [&](absl::Duration d) {
    sleeps.push_back(d);
    clock_.Advance(d);
  };
  auto created = CreateNcclCollective(store_, "job/3/", 0, 1, 0, o);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Collective> c = std::move(*created);

  runtime_->set_event_polls(5);  // done at the sixth query
  sleeps.clear();
  const int queries = runtime_->event_queries();
  const absl::Time issued = clock_.Now();
  ASSERT_TRUE(c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());
  EXPECT_TRUE(sleeps.empty()) << "slept " << sleeps.size() << " times (first "
                              << absl::FormatDuration(sleeps.front()) << ")";
  EXPECT_EQ(clock_.Now(), issued);
  EXPECT_EQ(runtime_->event_queries() - queries, 6);

  // Never done: the spin ends (the fake clock stands still: by its poll count), then sleeps
  // from a few microseconds (nccl_work.h's Backoff), each at most twice the last, up to
  // poll_interval (10ms), the last one cut to the deadline.
  runtime_->set_event_polls(0);
  runtime_->set_events_complete(false);
  sleeps.clear();
  CollectiveOptions opts;
  opts.timeout = absl::Seconds(1);
  const absl::Time start = clock_.Now();
  const absl::Status s =
      c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum, opts)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(clock_.Now() - start, absl::Seconds(1)) << "the deadline, to the tick";
  ASSERT_GT(sleeps.size(), 2u);
  EXPECT_LE(sleeps.front(), absl::Microseconds(10)) << "a sleep floor";
  for (size_t i = 1; i < sleeps.size(); ++i) {
    EXPECT_LE(sleeps[i], 2 * sleeps[i - 1]) << "sleep " << i;
    EXPECT_LE(sleeps[i], absl::Milliseconds(10)) << "sleep " << i;
  }
  EXPECT_EQ(*std::max_element(sleeps.begin(), sleeps.end()), absl::Milliseconds(10));
  EXPECT_LT(sleeps.size(), 130u) << "polls every poll_interval at most: ~100 plus the ramp";
}

// Another thread's Abort ends a Wait at its next poll, also while it backs off.
TEST_F(NcclCollectiveTest, AnAbortDuringTheBackOffEndsTheWaitAtTheNextPoll) {
  std::unique_ptr<Collective> c;
  int sleeps = 0;
  NcclOptions o = Options(runtime_);
  o.sleep = [&](absl::Duration d) {
    clock_.Advance(d);
    if (++sleeps == 4 && c != nullptr) c->Abort(absl::CancelledError("operator stop"));
  };
  auto created = CreateNcclCollective(store_, "job/3/", 0, 1, 0, o);
  ASSERT_TRUE(created.ok()) << created.status();
  c = std::move(*created);
  runtime_->set_events_complete(false);
  sleeps = 0;
  const absl::Status s = c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("operator stop"));
  EXPECT_EQ(sleeps, 4) << "no sleep after the abort";
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

// The success path: barrier, ncclCommFinalize polled to completion, ncclCommDestroy; no abort.
TEST_F(NcclCollectiveTest, CloseFinalizesThenDestroysTheCommunicatorWithoutAborting) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_finalize_polls(3);
  ASSERT_TRUE(c->Close(absl::Seconds(1)).ok());
  std::vector<std::string> calls = runtime_->calls();
  const auto barrier = std::find(calls.begin(), calls.end(), "AllReduce");
  const auto finalize = std::find(calls.begin(), calls.end(), "CommFinalize");
  const auto destroy = std::find(calls.begin(), calls.end(), "CommDestroy");
  ASSERT_NE(destroy, calls.end());
  EXPECT_LT(barrier, finalize);
  EXPECT_LT(finalize, destroy);
  // Destroy only once finalize's asynchronous part is over.
  EXPECT_EQ(*(destroy - 1), "CommGetAsyncError -> 0");
  EXPECT_EQ(runtime_->finalize_calls(), 1);
  EXPECT_EQ(runtime_->destroy_calls(), 1);
  const absl::Status after = c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait();
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition) << after;
  EXPECT_THAT(std::string(after.message()), HasSubstr("closed"));
  c.reset();
  EXPECT_EQ(runtime_->abort_calls(), 0);
  EXPECT_EQ(runtime_->live_streams(), 0);
  EXPECT_EQ(runtime_->live_allocations(), 0);
}

TEST_F(NcclCollectiveTest, CloseWithAPeerThatNeverClosesAbortsInsteadOfFinalizing) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_events_complete(false);  // the closing barrier never completes
  const absl::Status s = c->Close(absl::Milliseconds(500));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("barrier"));
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->finalize_calls(), 0);
  EXPECT_EQ(runtime_->destroy_calls(), 0);
}

TEST_F(NcclCollectiveTest, AFinalizeThatFailsAbortsTheCommunicator) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  runtime_->set_finalize_result(ncclRemoteError);
  const absl::Status s = c->Close(absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0: closing: "));
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->destroy_calls(), 0);
  c.reset();
  EXPECT_EQ(runtime_->abort_calls(), 1);  // not twice
}

TEST_F(NcclCollectiveTest, NoUsableGpuIsFailedPrecondition) {
  runtime_->set_set_device_result(cudaErrorInsufficientDriver);
  auto c = CreateNcclCollective(store_, "job/3/", 0, 1, 0, Options(runtime_));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no usable GPU: "));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("rank 0 (GPU 0)"));
  EXPECT_EQ(runtime_->init_calls(), 0);
}

TEST_F(NcclCollectiveTest, InvalidArgumentsAreRefusedBeforeAnyCall) {
  EXPECT_EQ(CreateNcclCollective(store_, "", 0, 1, 0, Options(runtime_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCollective(nullptr, "p/", 0, 1, 0, Options(runtime_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCollective(store_, "p/", 2, 2, 0, Options(runtime_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCollective(store_, "p/", 0, 1, -1, Options(runtime_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  NcclOptions zero = Options(runtime_);
  zero.collective_timeout = absl::ZeroDuration();
  EXPECT_EQ(CreateNcclCollective(store_, "p/", 0, 1, 0, zero).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(runtime_->calls().empty());
}

TEST_F(NcclCollectiveTest, ARankWhoseRankZeroNeverPublishesTimesOutNamingRankZero) {
  NcclOptions o = Options(runtime_);
  o.init_timeout = absl::Milliseconds(50);  // the store waits in real time
  auto c = CreateNcclCollective(store_, "job/5/", 1, 2, 0, o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("rank 1 waited 50ms for rank 0's NCCL unique id (key "
                        "job/5/nccl/unique_id): rank 0 never published it"));
  EXPECT_EQ(runtime_->init_calls(), 0);
}

TEST_F(NcclCollectiveTest, InitThatNeverFinishesTimesOutAbortsAndNamesTheMissingRanks) {
  // Rank 1 of 3 gets the id (rank 0 published it and started init), but rank 2 never comes, so
  // NCCL's init never finishes.
  ASSERT_TRUE(store_->Set(NcclUniqueIdKey("job/6/"), std::string(NCCL_UNIQUE_ID_BYTES, 'x')).ok());
  ASSERT_TRUE(PublishStarted(*store_, "job/6/", 0).ok());
  runtime_->set_init_async_result(ncclInProgress);
  const absl::Time start = clock_.Now();
  auto c = CreateNcclCollective(store_, "job/6/", 1, 3, 0, Options(runtime_));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  const std::string message(c.status().message());
  EXPECT_THAT(message,
              HasSubstr("rank 1 (GPU 0): NCCL communicator init did not finish within 10s"));
  EXPECT_THAT(message, HasSubstr("ranks that never started communicator init: 2)"));
  EXPECT_THAT(message, HasSubstr("check rank 0"));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(10));
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->last_init_id(), std::string(NCCL_UNIQUE_ID_BYTES, 'x'));
}

TEST_F(NcclCollectiveTest, InitFailingBecauseAPeerDiedIsUnavailableAndNamesRankZero) {
  ASSERT_TRUE(store_->Set(NcclUniqueIdKey("job/8/"), std::string(NCCL_UNIQUE_ID_BYTES, 'y')).ok());
  runtime_->set_init_async_result(ncclRemoteError);
  auto c = CreateNcclCollective(store_, "job/8/", 1, 2, 0, Options(runtime_));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("rank 0 created the NCCL unique id"));
  EXPECT_EQ(runtime_->abort_calls(), 1);
}

TEST_F(NcclCollectiveTest, AnInitCallThatFailsAtOnceIsReported) {
  runtime_->set_init_call_result(ncclInvalidUsage);
  auto c = CreateNcclCollective(store_, "job/4/", 0, 1, 0, Options(runtime_));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("ncclCommInitRankConfig("));
}

TEST_F(NcclCollectiveTest, RankZeroWaitsForEveryRankToJoinAndNamesTheOnesThatDoNot) {
  NcclOptions o = Options(runtime_);
  o.init_timeout = absl::Milliseconds(100);  // the store waits in real time
  auto c = CreateNcclCollective(store_, "job/2/", 0, 2, 0, o);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("rank(s) 1 never joined the NCCL communicator"));
  // The communicator it had made is torn down, nothing leaks.
  EXPECT_EQ(runtime_->abort_calls(), 1);
  EXPECT_EQ(runtime_->live_streams(), 0);
  EXPECT_EQ(runtime_->live_allocations(), 0);
}

TEST_F(NcclCollectiveTest, ARankThatNeverJoinsMakesTheOthersTimeOutAndAbortCleanly) {
  constexpr int kWorld = 3;  // rank 2 never starts
  std::vector<std::shared_ptr<FakeNcclRuntime>> runtimes;
  for (int r = 0; r < kWorld; ++r) {
    runtimes.push_back(std::make_shared<FakeNcclRuntime>());
    runtimes.back()->set_init_async_result(ncclInProgress);  // NCCL waits for rank 2 forever
  }
  std::vector<absl::Status> results(kWorld);
  RunRanks({0, 1}, [&](int rank) {
    results[rank] =
        CreateNcclCollective(store_, "job/1/", rank, kWorld, rank, Options(runtimes[rank]))
            .status();
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    // Rank 2 is always named. The fake clock makes the deadline pass within milliseconds, so a
    // peer thread that had not yet published its start may be listed as well.
    EXPECT_THAT(std::string(results[r].message()),
                ContainsRegex("never started communicator init: ([01],)*2\\)"));
    EXPECT_EQ(runtimes[r]->abort_calls(), 1);
  }
}

// The real runtime on a machine without a GPU (CI): a clear FAILED_PRECONDITION, before any
// rendezvous key is written.
TEST(NcclCollectiveRealRuntimeTest, WithoutAGpuCreateSaysNoUsableGpu) {
  if (DetectGpus().ok()) {
    GTEST_SKIP() << "a GPU is present: nccl_suite_test covers the real runtime";
  }
  auto store = std::make_shared<InMemoryKeyValueStore>();
  auto c = CreateNcclCollective(store, "job/real/", 0, 1, 0);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no usable GPU: "));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("cudaSetDevice(device)"));
  EXPECT_TRUE(store->Keys().empty());
}

// --- Compute marks and the side channel (strategy fsdp's parameter gathers) ---

// The calls from `from` on whose text starts with `prefix`.
std::vector<std::string> CallsStartingWith(const std::vector<std::string>& calls,
                                           const std::string& prefix, size_t from = 0) {
  std::vector<std::string> out;
  for (size_t i = from; i < calls.size(); ++i) {
    if (calls[i].rfind(prefix, 0) == 0) out.push_back(calls[i]);
  }
  return out;
}

// An operation after a mark waits for the mark's event, not for a new record of the compute
// stream; OrderCompute makes the compute stream wait for the completion event, and the host
// waits for nothing.
TEST_F(NcclCollectiveTest, AGatherAfterAMarkWaitsForItAndComputeWaitsOnTheDevice) {
  std::unique_ptr<Collective> c = CreateAlone();
  ASSERT_NE(c, nullptr);
  const uintptr_t comm_stream = FakeNcclRuntime::Id(runtime_->created_stream());
  absl::StatusOr<std::shared_ptr<const ComputeMark>> mark = c->MarkCompute();
  ASSERT_TRUE(mark.ok()) << mark.status();
  std::vector<std::string> calls = runtime_->calls();
  ASSERT_EQ(CallsStartingWith(calls, "EventRecord(").size(), 1u);
  const std::string record = CallsStartingWith(calls, "EventRecord(").front();
  EXPECT_THAT(record, HasSubstr(absl::StrCat("stream ", 0x77, ")")));
  const std::string mark_event = record.substr(std::strlen("EventRecord("),
                                               record.find(',') - std::strlen("EventRecord("));

  runtime_->ClearObservations();
  CollectiveOptions opts;
  opts.after = *mark;
  std::shared_ptr<Work> gather =
      c->AllGather({buf_, 4, DataType::kFloat32}, {buf_ + 4, 4, DataType::kFloat32}, opts);
  calls = runtime_->calls();
  EXPECT_THAT(CallsStartingWith(calls, "EventRecord("),
              ::testing::Each(HasSubstr(absl::StrCat("stream ", comm_stream, ")"))))
      << "no new record on the compute stream";
  EXPECT_THAT(calls, ::testing::Contains(
                         absl::StrCat("StreamWaitEvent(stream ", comm_stream, ", ", mark_event, ")")));
  const std::string done = CallsStartingWith(calls, "EventRecord(").back();
  const std::string done_event =
      done.substr(std::strlen("EventRecord("), done.find(',') - std::strlen("EventRecord("));

  const int queries = runtime_->event_queries();
  const size_t before = runtime_->calls().size();
  ASSERT_TRUE(gather->OrderCompute().ok());
  calls = runtime_->calls();
  EXPECT_EQ(std::vector<std::string>(calls.begin() + before, calls.end()),
            std::vector<std::string>{absl::StrCat("StreamWaitEvent(stream ", 0x77, ", ",
                                                  done_event, ")")});
  EXPECT_EQ(runtime_->event_queries(), queries) << "OrderCompute must not poll";
  EXPECT_TRUE(gather->Wait().ok());

  // A mark from another backend cannot order a device operation.
  struct Foreign : ComputeMark {};
  opts.after = std::make_shared<Foreign>();
  EXPECT_EQ(c->AllGather({buf_, 4, DataType::kFloat32}, {buf_ + 4, 4, DataType::kFloat32}, opts)
                ->Wait()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// NcclOptions::side_channel: a non-blocking ncclCommSplit of the communicator (color 0, key =
// rank) with its own stream, warmed up with the listed all-gathers, whose operations never run
// on the main communication stream.
TEST_F(NcclCollectiveTest, TheSideChannelIsASplitCommunicatorOnItsOwnStream) {
  NcclOptions o = Options(runtime_);
  o.side_channel = true;
  o.warm_up = {{CollectiveKind::kReduceScatter, 8, DataType::kFloat32, ReduceOp::kAvg},
               {CollectiveKind::kAllGather, 8, DataType::kFloat32, ReduceOp::kSum}};
  auto made = CreateNcclCollective(store_, "job/4/", 0, 1, 0, o);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Collective> c = std::move(*made);
  EXPECT_EQ(runtime_->split_calls(), 1);
  EXPECT_EQ(runtime_->last_split_blocking(), 0);
  EXPECT_EQ(runtime_->last_split_key(), 0);
  // The split, then the side channel's warm-up: its one-float all-reduce and the all-gather
  // only (the reduce-scatter stays on the main communicator).
  const std::vector<std::string> calls = runtime_->calls();
  const auto split = std::find(calls.begin(), calls.end(), "CommSplit(color 0, key 0)");
  ASSERT_NE(split, calls.end());
  const std::vector<std::string> after_split(split, calls.end());
  EXPECT_EQ(CallsStartingWith(after_split, "AllReduce").size(), 1u);
  EXPECT_EQ(CallsStartingWith(after_split, "AllGather").size(), 1u);
  EXPECT_EQ(CallsStartingWith(after_split, "ReduceScatter").size(), 0u);
  EXPECT_EQ(runtime_->live_streams(), 2);

  Collective* side = c->side_channel();
  ASSERT_NE(side, nullptr);
  EXPECT_EQ(side->rank(), 0);
  EXPECT_EQ(side->world_size(), 1);
  EXPECT_EQ(side->memory_kind(), MemoryKind::kDevice);
  runtime_->ClearObservations();
  ASSERT_TRUE(
      side->AllGather({buf_, 4, DataType::kFloat32}, {buf_ + 4, 4, DataType::kFloat32})->Wait().ok());
  ASSERT_TRUE(c->ReduceScatter({buf_, 4, DataType::kFloat32}, {buf_ + 8, 4, DataType::kFloat32},
                               ReduceOp::kAvg)
                  ->Wait()
                  .ok());
  const std::vector<FakeNcclRuntime::Op> ops = runtime_->ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].stream, runtime_->created_stream()) << "the side channel's own stream";
  EXPECT_NE(ops[1].stream, ops[0].stream);
  // Close: the side channel's barrier, finalize and destroy, then the main communicator's.
  ASSERT_TRUE(c->Close(absl::Seconds(1)).ok());
  EXPECT_EQ(runtime_->finalize_calls(), 2);
  EXPECT_EQ(runtime_->destroy_calls(), 2);
  EXPECT_EQ(runtime_->abort_calls(), 0);
  c.reset();
  EXPECT_EQ(runtime_->live_streams(), 0);
  EXPECT_EQ(runtime_->live_allocations(), 0);
}

// Aborting the collective aborts the side channel (both communicators, the side channel's
// operations failing with the reason); a side channel whose gather times out fails alone.
TEST_F(NcclCollectiveTest, AbortReachesTheSideChannelButNotTheOtherWayRound) {
  NcclOptions o = Options(runtime_);
  o.side_channel = true;
  auto made = CreateNcclCollective(store_, "job/5/", 0, 1, 0, o);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Collective> c = std::move(*made);
  Collective* side = c->side_channel();
  ASSERT_NE(side, nullptr);

  runtime_->set_events_complete(false);  // the peer stops answering
  CollectiveOptions quick;
  quick.timeout = absl::Milliseconds(100);
  const absl::Status timed_out =
      side->AllGather({buf_, 4, DataType::kFloat32}, {buf_ + 4, 4, DataType::kFloat32}, quick)
          ->Wait();
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_EQ(runtime_->abort_calls(), 1) << "only the side channel";
  runtime_->set_events_complete(true);
  EXPECT_TRUE(c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait().ok());

  c->Abort(absl::CancelledError("the coordinator stopped the job"));
  EXPECT_EQ(runtime_->abort_calls(), 2);
  const absl::Status after = c->AllReduce({buf_, 4, DataType::kFloat32}, ReduceOp::kSum)->Wait();
  EXPECT_EQ(after.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(after.message()), HasSubstr("the coordinator stopped the job"));
}

// The other order: a live side channel is aborted with its collective, and its operations
// then fail with the collective's reason.
TEST_F(NcclCollectiveTest, AbortingTheCollectiveFailsTheSideChannelsOperations) {
  NcclOptions o = Options(runtime_);
  o.side_channel = true;
  auto made = CreateNcclCollective(store_, "job/6/", 0, 1, 0, o);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Collective> c = std::move(*made);
  c->Abort(absl::CancelledError("stop"));
  EXPECT_EQ(runtime_->abort_calls(), 2);
  const absl::Status gather =
      c->side_channel()
          ->AllGather({buf_, 4, DataType::kFloat32}, {buf_ + 4, 4, DataType::kFloat32})
          ->Wait();
  EXPECT_EQ(gather.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(gather.message()), HasSubstr("stop"));
  EXPECT_EQ(c->Close(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader
