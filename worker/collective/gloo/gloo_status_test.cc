#include "worker/collective/gloo/gloo_status.h"

#include <chrono>
#include <new>
#include <stdexcept>

#include "common/rank_failure.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

void ThrowIo(const char* message) { throw gloo::IoException(message); }
// Throws once `after` has passed on the steady clock (as gloo does when its timeout runs out).
void ThrowIoAfter(std::chrono::milliseconds after, const char* message) {
  const auto until = std::chrono::steady_clock::now() + after;
  while (std::chrono::steady_clock::now() < until) {
  }
  throw gloo::IoException(message);
}
void ThrowEnforce() { throw gloo::EnforceNotMet("f.cc", 7, "a == b", "1 vs 2"); }
void ThrowStd() { throw std::runtime_error("boom"); }
void ThrowBadAlloc() { throw std::bad_alloc(); }
int Succeed(int x) { return x + 1; }

v1::RankFailure::Kind KindOf(const absl::Status& status) { return FailureOf(status).kind(); }

TEST(GlooStatusTest, NoThrowIsOk) {
  int y = 0;
  EXPECT_TRUE(RL_GLOO_CALL(y = Succeed(1)).ok());
  EXPECT_EQ(y, 2);
}

TEST(GlooStatusTest, IoExceptionAfterTheWholeTimeoutIsAPeerTimeoutNamingTheExpression) {
  const std::chrono::milliseconds timeout(2);
  absl::Status s = RL_GLOO_CALL_WITHIN(timeout, ThrowIoAfter(timeout, "Timed out waiting 2ms"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(KindOf(s), v1::RankFailure::PEER_TIMED_OUT);
  EXPECT_THAT(s.message(), HasSubstr("ThrowIoAfter(timeout, \"Timed out waiting"));
}

TEST(GlooStatusTest, IoExceptionBeforeTheTimeoutIsAClosedPeerWhateverItsWords) {
  // The words say "timed out", the clock says it was not: the clock decides.
  absl::Status s = RL_GLOO_CALL_WITHIN(std::chrono::milliseconds(60000), ThrowIo("Timed out"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(KindOf(s), v1::RankFailure::PEER_CLOSED);
  s = RL_GLOO_CALL(ThrowIo("Connection closed by peer [127.0.0.1]:4000"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(KindOf(s), v1::RankFailure::PEER_CLOSED);
  EXPECT_THAT(s.message(), HasSubstr("Connection closed by peer"));
}

TEST(GlooStatusTest, EnforceAndOtherExceptionsAreInternal) {
  absl::Status s = RL_GLOO_CALL(ThrowEnforce());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(KindOf(s), v1::RankFailure::INTERNAL);
  EXPECT_THAT(s.message(), HasSubstr("ThrowEnforce()"));
  s = RL_GLOO_CALL(ThrowStd());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(KindOf(s), v1::RankFailure::INTERNAL);
  EXPECT_THAT(s.message(), HasSubstr("boom"));
}

TEST(GlooStatusTest, BadAllocIsOutOfMemory) {
  absl::Status s = RL_GLOO_CALL(ThrowBadAlloc());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(KindOf(s), v1::RankFailure::OUT_OF_MEMORY);
}

}  // namespace
}  // namespace ringleader
