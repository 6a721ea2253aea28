#include "worker/collective/gloo/gloo_status.h"

#include <stdexcept>

#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

void ThrowIo(const char* message) { throw gloo::IoException(message); }
void ThrowEnforce() { throw gloo::EnforceNotMet("f.cc", 7, "a == b", "1 vs 2"); }
void ThrowStd() { throw std::runtime_error("boom"); }
int Succeed(int x) { return x + 1; }

TEST(GlooStatusTest, NoThrowIsOk) {
  int y = 0;
  EXPECT_TRUE(RL_GLOO_CALL(y = Succeed(1)).ok());
  EXPECT_EQ(y, 2);
}

TEST(GlooStatusTest, TimeoutIoExceptionIsDeadlineExceededNamingTheExpression) {
  absl::Status s = RL_GLOO_CALL(ThrowIo("Timed out waiting 500ms for recv operation"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("ThrowIo(\"Timed out waiting"));
  EXPECT_THAT(s.message(), HasSubstr("for recv operation"));
}

TEST(GlooStatusTest, OtherIoExceptionIsUnavailable) {
  absl::Status s = RL_GLOO_CALL(ThrowIo("Connection closed by peer [127.0.0.1]:4000"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("Connection closed by peer"));
}

TEST(GlooStatusTest, EnforceAndOtherExceptionsAreInternal) {
  absl::Status s = RL_GLOO_CALL(ThrowEnforce());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("ThrowEnforce()"));
  s = RL_GLOO_CALL(ThrowStd());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("boom"));
}

}  // namespace
}  // namespace ringleader
