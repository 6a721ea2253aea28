// Failure behaviour of the gloo backend. gloo may std::terminate from its own I/O thread after a
// peer failure, so every scenario runs in a forked child that reports a one-line outcome; the
// parent asserts on that report and bounds the child's run time.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/gloo/gloo_test_util.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {
namespace {

using ::ringleader::testing_util::ChildOutcome;
using ::ringleader::testing_util::CreateGlooRanks;
using ::ringleader::testing_util::ForEachRankInParallel;
using ::ringleader::testing_util::RunInChild;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kShortTimeout = absl::Milliseconds(500);
// Slack over a timeout for scheduling on a loaded machine; a hang would take far longer.
constexpr absl::Duration kSlack = absl::Seconds(5);
constexpr absl::Duration kChildLimit = absl::Seconds(40);

// "<CODE>|<elapsed ms>|<message>" per line, one line per interesting status.
std::string Line(const absl::Status& s, absl::Duration elapsed) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), "|", absl::ToInt64Milliseconds(elapsed),
                      "|", s.message(), "\n");
}

struct Reported {
  std::string code;
  int64_t elapsed_ms = -1;
  std::string message;
};

std::vector<Reported> Parse(const std::string& report) {
  std::vector<Reported> out;
  for (absl::string_view line : absl::StrSplit(report, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('|', 2));
    Reported r;
    r.code = parts[0];
    if (parts.size() > 1) r.elapsed_ms = std::stoll(parts[1]);
    if (parts.size() > 2) r.message = parts[2];
    out.push_back(r);
  }
  return out;
}

TEST(GlooCollectiveFailureTest, RankThatNeverIssuesMakesOthersFailWithinTheOpTimeout) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(absl::StrCat("world size ", n));
    const ChildOutcome outcome = RunInChild(
        [n] {
          GlooOptions opts;
          opts.rendezvous_timeout = absl::Seconds(20);
          opts.collective_timeout = kShortTimeout;
          auto ranks = CreateGlooRanks(n, opts);
          for (auto& r : ranks) {
            if (!r.ok()) return Line(r.status(), absl::ZeroDuration());
          }
          std::string report;
          absl::Mutex mu;
          // The last rank issues nothing; the others all-reduce, then try once more.
          ForEachRankInParallel(n - 1, [&](int r) {
            std::vector<float> buf(1000, 1.0f);
            const absl::Time start = absl::Now();
            absl::Status first = (*ranks[r])
                                     ->AllReduce({buf.data(), buf.size(), DataType::kFloat32},
                                                 ReduceOp::kSum)
                                     ->Wait();
            const absl::Duration elapsed = absl::Now() - start;
            absl::Status later = (*ranks[r])->Barrier()->Wait();
            absl::MutexLock lock(&mu);
            report += Line(first, elapsed);
            report += Line(later, absl::ZeroDuration());
          });
          return report;
        },
        kChildLimit);
    ASSERT_TRUE(outcome.exited && outcome.exit_code == 0) << outcome.Describe();
    const std::vector<Reported> lines = Parse(outcome.report);
    ASSERT_EQ(lines.size(), 2u * (n - 1)) << outcome.report;
    for (size_t i = 0; i < lines.size(); i += 2) {
      const Reported& first = lines[i];
      const Reported& later = lines[i + 1];
      EXPECT_THAT(first.code, AnyOf("DEADLINE_EXCEEDED", "UNAVAILABLE")) << first.message;
      EXPECT_LE(first.elapsed_ms, absl::ToInt64Milliseconds(kShortTimeout + kSlack));
      EXPECT_THAT(first.message, HasSubstr("all_reduce(sum, fp32)"));
      EXPECT_THAT(first.message, HasSubstr("count 1000"));
      EXPECT_THAT(first.message, HasSubstr("gloo::allreduce(o)"));  // the failing expression
      // Dead afterwards: the next operation fails at once with the first error.
      EXPECT_EQ(later.code, first.code);
      EXPECT_EQ(later.message, first.message);
    }
  }
}

TEST(GlooCollectiveFailureTest, RendezvousWithMissingRankFailsNamingTheKey) {
  const ChildOutcome outcome = RunInChild(
      [] {
        GlooOptions opts;
        opts.rendezvous_timeout = kShortTimeout;
        auto store = std::make_shared<InMemoryKeyValueStore>();
        std::string report;
        absl::Mutex mu;
        // World of 3; rank 2 never joins.
        ForEachRankInParallel(2, [&](int r) {
          const absl::Time start = absl::Now();
          auto c = CreateGlooCollective(store, "job7/3/gloo/", r, 3, opts);
          const absl::Duration elapsed = absl::Now() - start;
          absl::MutexLock lock(&mu);
          report += Line(c.ok() ? absl::OkStatus() : c.status(), elapsed);
        });
        return report;
      },
      kChildLimit);
  ASSERT_TRUE(outcome.exited && outcome.exit_code == 0) << outcome.Describe();
  const std::vector<Reported> lines = Parse(outcome.report);
  ASSERT_EQ(lines.size(), 2u) << outcome.report;
  for (const Reported& r : lines) {
    EXPECT_EQ(r.code, "DEADLINE_EXCEEDED") << r.message;
    EXPECT_THAT(r.message, HasSubstr("job7/3/gloo/2"));  // rank 2's address key
    EXPECT_THAT(r.message, HasSubstr("not every rank joined"));
    // One wait per missing key: bounded by a small multiple of the timeout, not a hang.
    EXPECT_LE(r.elapsed_ms, absl::ToInt64Milliseconds(2 * kShortTimeout + kSlack));
  }
}

TEST(GlooCollectiveFailureTest, StoreErrorDuringRendezvousKeepsTheStoreCode) {
  const ChildOutcome outcome = RunInChild(
      [] {
        auto store = std::make_shared<InMemoryKeyValueStore>();
        store->InjectError(absl::FailedPreconditionError("attempt 3 of job7 is over"));
        auto c = CreateGlooCollective(store, "job7/3/gloo/", 0, 2, GlooOptions());
        return Line(c.ok() ? absl::OkStatus() : c.status(), absl::ZeroDuration());
      },
      kChildLimit);
  ASSERT_TRUE(outcome.exited && outcome.exit_code == 0) << outcome.Describe();
  const std::vector<Reported> lines = Parse(outcome.report);
  ASSERT_EQ(lines.size(), 1u) << outcome.report;
  EXPECT_EQ(lines[0].code, "FAILED_PRECONDITION") << lines[0].message;
  EXPECT_THAT(lines[0].message, HasSubstr("attempt 3 of job7 is over"));
}

TEST(GlooCollectiveFailureTest, PeerThatLeavesMakesOthersFailBeforeTheTimeout) {
  const ChildOutcome outcome = RunInChild(
      [] {
        GlooOptions opts;
        opts.rendezvous_timeout = absl::Seconds(20);
        opts.collective_timeout = absl::Seconds(20);
        auto ranks = CreateGlooRanks(2, opts);
        for (auto& r : ranks) {
          if (!r.ok()) return Line(r.status(), absl::ZeroDuration());
        }
        // Rank 1 goes away (its sockets close) while rank 0 waits in an all-reduce.
        std::vector<float> buf(1000, 1.0f);
        const absl::Time start = absl::Now();
        auto work =
            (*ranks[0])->AllReduce({buf.data(), buf.size(), DataType::kFloat32}, ReduceOp::kSum);
        ranks[1]->reset();
        absl::Status s = work->Wait();
        return Line(s, absl::Now() - start);
      },
      kChildLimit);
  ASSERT_TRUE(outcome.exited && outcome.exit_code == 0) << outcome.Describe();
  const std::vector<Reported> lines = Parse(outcome.report);
  ASSERT_EQ(lines.size(), 1u) << outcome.report;
  EXPECT_EQ(lines[0].code, "UNAVAILABLE") << lines[0].message;
  EXPECT_LT(lines[0].elapsed_ms, 20000) << "should fail on the closed socket, not the timeout";
}

TEST(GlooCollectiveFailureTest, AbortFailsQueuedWorkAtOnceAndInFlightWorkWithAborted) {
  const ChildOutcome outcome = RunInChild(
      [] {
        GlooOptions opts;
        opts.rendezvous_timeout = absl::Seconds(20);
        opts.collective_timeout = absl::Seconds(2);
        opts.comm_threads = 1;
        auto ranks = CreateGlooRanks(2, opts);
        for (auto& r : ranks) {
          if (!r.ok()) return Line(r.status(), absl::ZeroDuration());
        }
        Collective& c = **ranks[0];
        // Rank 1 issues nothing, so the first all-reduce blocks inside gloo; the rest queue.
        std::vector<float> a(100, 1.0f), b(100, 1.0f);
        auto in_flight = c.AllReduce({a.data(), a.size(), DataType::kFloat32}, ReduceOp::kSum);
        auto queued1 = c.AllReduce({b.data(), b.size(), DataType::kFloat32}, ReduceOp::kSum);
        auto queued2 = c.Barrier();
        c.Abort(absl::CancelledError("user cancelled job7"));
        std::string report;
        // Queued work is failed by Abort itself, before it returns.
        report += Line(queued1->IsDone() ? queued1->Wait() : absl::UnknownError("not done"),
                       absl::ZeroDuration());
        report += Line(queued2->IsDone() ? queued2->Wait() : absl::UnknownError("not done"),
                       absl::ZeroDuration());
        report += Line(c.Barrier()->Wait(), absl::ZeroDuration());
        // In flight: ends by its own timeout and then reports ABORTED.
        report += Line(in_flight->Wait(), absl::ZeroDuration());
        return report;
      },
      kChildLimit);
  ASSERT_TRUE(outcome.exited && outcome.exit_code == 0) << outcome.Describe();
  const std::vector<Reported> lines = Parse(outcome.report);
  ASSERT_EQ(lines.size(), 4u) << outcome.report;
  for (const Reported& r : lines) {
    EXPECT_EQ(r.code, "ABORTED") << r.message;
    EXPECT_THAT(r.message, HasSubstr("user cancelled job7"));
  }
}

}  // namespace
}  // namespace ringleader
