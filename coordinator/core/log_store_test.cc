// LogStore: offsets (retries ignored, gaps skipped), bounded reads, and the three budgets (rank,
// job by oldest generation, all jobs by least recent append).
#include "coordinator/core/log_store.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;

const JobId kJob("job-000001");
constexpr size_t kAll = size_t{1} << 30;

LogStoreOptions Budgets(size_t rank, size_t job, size_t total) {
  LogStoreOptions options;
  options.max_bytes_per_rank = rank;
  options.max_bytes_per_job = job;
  options.max_bytes_total = total;
  return options;
}

// The chunk as "offset:skipped:data", or "none".
std::string Show(const std::optional<v1::LogChunk>& chunk) {
  if (!chunk.has_value()) return "none";
  return std::to_string(chunk->offset()) + ":" + std::to_string(chunk->skipped()) + ":" +
         chunk->data();
}

TEST(LogStoreTest, AppendsAreReadBackByOffsetAndRetriesAreIgnored) {
  LogStore store(LogStoreOptions{});
  store.Append(kJob, 1, 0, 2, 0, "hello ");
  store.Append(kJob, 1, 0, 2, 6, "world");
  store.Append(kJob, 1, 0, 2, 0, "hello ");  // a retry of the first chunk
  store.Append(kJob, 1, 0, 2, 8, "rld!!");   // half retry: only "!!" is new
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, std::nullopt, kAll)), "0:0:hello world!!");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 5, kAll)), "5:0: world!!");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 5, 3)), "5:0: wo");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 13, kAll)), "none");
  EXPECT_TRUE(store.HasNew(kJob, 1, 0, 12));
  EXPECT_FALSE(store.HasNew(kJob, 1, 0, 13));
  EXPECT_FALSE(store.HasNew(kJob, 1, 0, 99));  // a reader ahead waits
  EXPECT_EQ(store.bytes(), 13u);
  // Other ranks, generations and jobs have nothing.
  EXPECT_EQ(Show(store.Read(kJob, 1, 1, std::nullopt, kAll)), "none");
  EXPECT_EQ(Show(store.Read(kJob, 2, 0, 0, kAll)), "none");
  EXPECT_EQ(Show(store.Read(JobId("job-000002"), 1, 0, 0, kAll)), "none");
  EXPECT_THAT(store.Ranks(kJob, 1), ElementsAre(0u));
}

TEST(LogStoreTest, AGapIsSkippedByReaders) {
  LogStore store(LogStoreOptions{});
  store.Append(kJob, 1, 0, 1, 0, "abc");
  store.Append(kJob, 1, 0, 1, 10, "xyz");                       // bytes 3..9 never arrived
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 0, kAll)), "0:0:abc");  // a read stops at the gap
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 3, kAll)), "10:7:xyz");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 3, 0)), "10:7:");  // skipped even with no room
  // A late chunk inside the gap is ignored like a retry (offsets only move forward).
  store.Append(kJob, 1, 0, 1, 3, "def");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 3, kAll)), "10:7:xyz");
}

TEST(LogStoreTest, ReadsCrossPiecesOfLargeAppends) {
  LogStore store(LogStoreOptions{});
  std::string big;
  for (int i = 0; i < 200000; ++i) big.push_back(static_cast<char>('a' + i % 26));
  store.Append(kJob, 1, 3, 4, 0, big.substr(0, 150000));
  store.Append(kJob, 1, 3, 4, 150000, big.substr(150000));
  const std::optional<v1::LogChunk> all = store.Read(kJob, 1, 3, std::nullopt, kAll);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->rank(), 3u);
  EXPECT_TRUE(all->data() == big) << "read back " << all->data().size() << " bytes";
}

TEST(LogStoreTest, ARankKeepsItsMostRecentBytes) {
  LogStore store(Budgets(/*rank=*/10, /*job=*/kAll, /*total=*/kAll));
  store.Append(kJob, 1, 0, 1, 0, "0123456789");
  store.Append(kJob, 1, 0, 1, 10, "abcde");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, std::nullopt, kAll)), "5:0:56789abcde");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 0, kAll)), "5:5:56789abcde");
  // An append larger than the budget keeps its last bytes only.
  store.Append(kJob, 1, 0, 1, 15, "ABCDEFGHIJKLMNOPQRST");
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 15, kAll)), "25:10:KLMNOPQRST");
  EXPECT_EQ(store.bytes(), 10u);
}

TEST(LogStoreTest, EachRankOfAnAttemptGetsItsShareOfTheJobBudget) {
  LogStore store(Budgets(/*rank=*/100, /*job=*/20, /*total=*/kAll));
  for (uint32_t rank = 0; rank < 4; ++rank) store.Append(kJob, 1, rank, 4, 0, "0123456789");
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Show(store.Read(kJob, 1, rank, 0, kAll)), "5:5:56789") << "rank " << rank;
  }
  EXPECT_EQ(store.job_bytes(kJob), 20u);
}

TEST(LogStoreTest, TheOldestGenerationIsTrimmedFirstItsLargestRankFirst) {
  LogStore store(Budgets(/*rank=*/100, /*job=*/40, /*total=*/kAll));  // 20 per rank of 2
  store.Append(kJob, 1, 0, 2, 0, "aaaaaaaaaa");                       // 10
  store.Append(kJob, 1, 1, 2, 0, "bbbbbbbbbbbbbbb");                  // 15
  store.Append(kJob, 2, 0, 2, 0, "cccccccccc");                       // 10
  store.Append(kJob, 2, 1, 2, 0, "dddddddddd");                       // 10: 45 > 40
  EXPECT_EQ(store.job_bytes(kJob), 40u);
  EXPECT_EQ(Show(store.Read(kJob, 1, 1, 0, kAll)), "5:5:bbbbbbbbbb");  // the largest rank
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 0, kAll)), "0:0:aaaaaaaaaa");
  store.Append(kJob, 2, 0, 2, 10, "CCCCCCCCCC");  // 50 > 40: generation 1 gives 10 more
  EXPECT_EQ(store.job_bytes(kJob), 40u);
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, 0, kAll)), "10:10:");  // everything dropped
  EXPECT_EQ(Show(store.Read(kJob, 1, 1, 0, kAll)), "5:5:bbbbbbbbbb");
  EXPECT_EQ(Show(store.Read(kJob, 2, 0, 0, kAll)), "0:0:ccccccccccCCCCCCCCCC");
  EXPECT_EQ(Show(store.Read(kJob, 2, 1, 0, kAll)), "0:0:dddddddddd");
}

TEST(LogStoreTest, TheTotalBudgetTrimsTheJobLeastRecentlyWrittenTo) {
  LogStore store(Budgets(/*rank=*/100, /*job=*/100, /*total=*/30));
  const JobId other("job-000002");
  store.Append(kJob, 1, 0, 1, 0, "aaaaaaaaaaaaaaaaaaaa");   // 20
  store.Append(other, 1, 0, 1, 0, "bbbbbbbbbbbbbbbbbbbb");  // 20: 40 > 30
  EXPECT_EQ(store.bytes(), 30u);
  EXPECT_EQ(store.job_bytes(kJob), 10u);
  EXPECT_EQ(store.job_bytes(other), 20u);
  store.Append(kJob, 1, 0, 1, 20, "AAAAA");  // now `other` is the least recent
  EXPECT_EQ(store.bytes(), 30u);
  EXPECT_EQ(store.job_bytes(kJob), 15u);
  EXPECT_EQ(Show(store.Read(other, 1, 0, 0, kAll)), "5:5:bbbbbbbbbbbbbbb");
}

TEST(LogStoreTest, RemovingAJobFreesItsBytesAndTheTotalBudget) {
  const JobId other("job-000002");
  LogStore store(Budgets(kAll, kAll, 10));
  store.Append(kJob, 1, 0, 1, 0, "12345");
  store.Append(other, 1, 0, 1, 0, "abcde");
  ASSERT_EQ(store.bytes(), 10u);
  store.RemoveJob(kJob);
  EXPECT_EQ(store.bytes(), 5u);
  EXPECT_EQ(store.job_bytes(kJob), 0u);
  EXPECT_EQ(Show(store.Read(kJob, 1, 0, std::nullopt, kAll)), "none");
  EXPECT_TRUE(store.Ranks(kJob, 1).empty());
  store.RemoveJob(kJob);  // nothing left: no-op
  // The other job keeps its bytes, and the freed budget is there for new output.
  store.Append(JobId("job-000003"), 1, 0, 1, 0, "vwxyz");
  EXPECT_EQ(store.bytes(), 10u);
  EXPECT_EQ(Show(store.Read(other, 1, 0, std::nullopt, kAll)), "0:0:abcde");
}

}  // namespace
}  // namespace ringleader
