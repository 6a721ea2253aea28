#include "coordinator/core/preflight_judge.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct Link {
  uint32_t a;
  uint32_t b;
  double mb_per_s;  // < 0: the exchange failed
};

// Ranks named w0, w1, ... with these matmul rates; each link is reported by both its ends.
std::vector<PreflightRank> Fleet(const std::vector<double>& gflops,
                                 const std::vector<Link>& links) {
  std::vector<PreflightRank> ranks;
  for (size_t r = 0; r < gflops.size(); ++r) {
    v1::PreflightReport report;
    report.set_gflops(gflops[r]);
    report.set_matmul_n(256);
    ranks.push_back({"id-" + std::to_string(r), "w" + std::to_string(r), "h", report});
  }
  for (const Link& link : links) {
    for (uint32_t end : {link.a, link.b}) {
      v1::PreflightPairReport* pair = ranks[end].report->add_pairs();
      pair->set_rank_a(link.a);
      pair->set_rank_b(link.b);
      pair->set_ok(link.mb_per_s >= 0);
      if (link.mb_per_s < 0) pair->set_error("timed out");
      if (link.mb_per_s >= 0) pair->set_bandwidth_mb_per_s(link.mb_per_s);
      if (link.mb_per_s >= 0) pair->set_latency_us(50);
    }
  }
  return ranks;
}

std::vector<std::string> Quarantined(const v1::PreflightResult& result) {
  std::vector<std::string> names;
  for (const v1::PreflightWorker& worker : result.workers()) {
    if (worker.quarantined()) names.push_back(worker.name());
  }
  return names;
}

TEST(JudgePreflightTest, CleanFleetNamesNobody) {
  const v1::PreflightResult result =
      JudgePreflight(Fleet({10, 9, 11}, {{0, 1, 900}, {0, 2, 1000}, {1, 2, 800}}), 0.5);
  EXPECT_TRUE(result.clean());
  EXPECT_THAT(Quarantined(result), IsEmpty());
  EXPECT_THAT(result.findings(), IsEmpty());
  EXPECT_DOUBLE_EQ(result.median_gflops(), 10);
  EXPECT_DOUBLE_EQ(result.median_bandwidth_mb_per_s(), 900);
  ASSERT_EQ(result.pairs_size(), 3);
  EXPECT_EQ(result.pairs(0).worker_a(), "w0");
  EXPECT_EQ(result.pairs(0).worker_b(), "w1");
}

TEST(JudgePreflightTest, SlowMatmulIsNamedWithItsFigures) {
  const v1::PreflightResult result =
      JudgePreflight(Fleet({10, 2, 11}, {{0, 1, 900}, {0, 2, 1000}, {1, 2, 800}}), 0.5);
  EXPECT_FALSE(result.clean());
  EXPECT_THAT(Quarantined(result), ElementsAre("w1"));
  EXPECT_THAT(result.workers(1).reason(), HasSubstr("matmul 2 GFLOP/s, 0.20 of the median 10"));
  EXPECT_DOUBLE_EQ(result.workers(1).fraction_of_median(), 0.2);
  ASSERT_EQ(result.findings_size(), 1);
  EXPECT_THAT(result.findings(0), HasSubstr("worker w1 on h"));
}

TEST(JudgePreflightTest, JustAboveTheFractionIsNotNamed) {
  // 5.5 / 10 = 0.55 of the median.
  EXPECT_THAT(Quarantined(JudgePreflight(Fleet({10, 5.5, 11}, {}), 0.5)), IsEmpty());
  EXPECT_THAT(Quarantined(JudgePreflight(Fleet({10, 5.5, 11}, {}), 0.6)), ElementsAre("w1"));
}

TEST(JudgePreflightTest, WorkerCommonToTheSlowPairsIsNamed) {
  // w2's matmul is fine, its links are not; the median over pairs would be one of its own.
  const v1::PreflightResult result =
      JudgePreflight(Fleet({10, 10, 10}, {{0, 1, 1000}, {0, 2, 100}, {1, 2, 120}}), 0.5);
  EXPECT_THAT(Quarantined(result), ElementsAre("w2"));
  EXPECT_THAT(result.workers(2).reason(), HasSubstr("every pair with it is bad"));
  EXPECT_THAT(result.workers(2).reason(), HasSubstr("w0-w2 100 MB/s"));
  EXPECT_TRUE(result.pairs(1).bad());
  EXPECT_FALSE(result.pairs(0).bad());
}

TEST(JudgePreflightTest, WorkerCommonToTheFailingPairsIsNamed) {
  const v1::PreflightResult result =
      JudgePreflight(Fleet({10, 10, 10}, {{0, 1, 1000}, {0, 2, -1}, {1, 2, -1}}), 0.5);
  EXPECT_THAT(Quarantined(result), ElementsAre("w2"));
  EXPECT_THAT(result.workers(2).reason(), HasSubstr("w0-w2 failed: timed out"));
  EXPECT_FALSE(result.pairs(1).ok());
}

TEST(JudgePreflightTest, TwoWorkersCannotTellWhichEndIsSlow) {
  const v1::PreflightResult result = JudgePreflight(Fleet({10, 10}, {{0, 1, -1}}), 0.5);
  EXPECT_THAT(Quarantined(result), IsEmpty());
  EXPECT_FALSE(result.clean());
  ASSERT_EQ(result.findings_size(), 1);
  EXPECT_THAT(result.findings(0), HasSubstr("pair w0-w1 failed"));
  EXPECT_THAT(result.findings(0), HasSubstr("with 2 workers the slow or broken end cannot be told"));
  EXPECT_THAT(result.findings(0), HasSubstr("nobody quarantined"));
}

TEST(JudgePreflightTest, EveryPairBadIsTheNetworkNotAWorker) {
  const v1::PreflightResult result =
      JudgePreflight(Fleet({10, 10, 10}, {{0, 1, -1}, {0, 2, -1}, {1, 2, -1}}), 0.5);
  EXPECT_THAT(Quarantined(result), IsEmpty());
  ASSERT_EQ(result.findings_size(), 3);
  EXPECT_THAT(result.findings(0), HasSubstr("the network or the backend"));
}

TEST(JudgePreflightTest, OneBadLinkBetweenHealthyWorkersNamesNobody) {
  const v1::PreflightResult result = JudgePreflight(
      Fleet({10, 10, 10, 10},
            {{0, 1, 1000}, {2, 3, 1000}, {0, 2, 1000}, {1, 3, -1}, {0, 3, 1000}, {1, 2, 1000}}),
      0.5);
  EXPECT_THAT(Quarantined(result), IsEmpty());
  ASSERT_EQ(result.findings_size(), 1);
  EXPECT_THAT(result.findings(0), HasSubstr("pair w1-w3 failed"));
  EXPECT_THAT(result.findings(0), HasSubstr("the link between them"));
}

TEST(JudgePreflightTest, AWorkerNamedForItsMatmulDoesNotMakeItsPeersLinkSuspects) {
  // w2 is starved (matmul 0.40 of the median), so its pairs are slow too; w0-w1 is borderline.
  // Seen in a loaded test run: w1 was quarantined because "every pair with it" was bad, one of
  // them being its pair with w2.
  const v1::PreflightResult result =
      JudgePreflight(Fleet({49, 44, 17.7}, {{2, 1, 147}, {2, 0, 345}, {1, 0, 166}}), 0.5);
  EXPECT_THAT(Quarantined(result), ElementsAre("w2"));
  EXPECT_THAT(result.workers(2).reason(), HasSubstr("matmul 17.7 GFLOP/s"));
  ASSERT_EQ(result.findings_size(), 2);
  EXPECT_THAT(result.findings(0), HasSubstr("pair w0-w1 slow"));
  EXPECT_THAT(result.findings(0), HasSubstr("the slow end cannot be told"));
  EXPECT_THAT(result.findings(0), HasSubstr("nobody quarantined"));
}

TEST(JudgePreflightTest, ALinkSuspectIsStillNamedBesideAWorkerNamedForItsMatmul) {
  // w3 is starved; w2's link is bad: its two judged pairs (with w0 and w1) are both slow.
  const v1::PreflightResult result = JudgePreflight(
      Fleet({10, 10, 10, 2},
            {{0, 1, 1000}, {0, 2, 100}, {1, 2, 120}, {0, 3, 300}, {1, 3, 300}, {2, 3, 90}}),
      0.5);
  EXPECT_THAT(Quarantined(result), ElementsAre("w2", "w3"));
  EXPECT_THAT(result.workers(2).reason(), HasSubstr("every pair with it is bad"));
  EXPECT_THAT(result.workers(2).reason(), Not(HasSubstr("w2-w3")));
}

TEST(JudgePreflightTest, ARankWithoutFiguresIsListedNotNamed) {
  std::vector<PreflightRank> ranks = Fleet({10, 10, 10}, {});
  ranks[1].report.reset();
  const v1::PreflightResult result = JudgePreflight(ranks, 0.5);
  EXPECT_THAT(Quarantined(result), IsEmpty());
  EXPECT_FALSE(result.workers(1).reported());
  EXPECT_FALSE(result.clean());
  EXPECT_THAT(result.findings(0), HasSubstr("w1 on h: no figures"));
}

TEST(JudgePreflightTest, OneEndReportingAFailureFailsThePair) {
  std::vector<PreflightRank> ranks = Fleet({10, 10, 10}, {{0, 1, 1000}});
  ranks[1].report->mutable_pairs(0)->set_ok(false);
  ranks[1].report->mutable_pairs(0)->set_error("connection reset");
  const v1::PreflightResult result = JudgePreflight(ranks, 0.5);
  ASSERT_EQ(result.pairs_size(), 1);
  EXPECT_FALSE(result.pairs(0).ok());
  EXPECT_EQ(result.pairs(0).error(), "connection reset");
}

}  // namespace
}  // namespace ringleader
