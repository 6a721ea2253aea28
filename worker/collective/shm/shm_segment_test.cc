// The shared-memory segment across real processes: a peer that maps it from another process is
// seen; one whose process is gone ends the others' wait naming it; a segment that is not the
// one announced is refused.
#include "worker/collective/shm/shm_segment.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/rank_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

constexpr size_t kSlot = 8192;

std::string UniqueName() {
  absl::BitGen gen;
  return absl::StrCat("/ringleader-segment-test-", absl::Uniform<uint64_t>(gen));
}

TEST(ShmSegmentTest, APeerProcessArrivesThroughTheSegment) {
  const std::string name = UniqueName();
  auto segment = ShmSegment::Create(name, 2, kSlot, 7, 9, 0);
  ASSERT_TRUE(segment.ok()) << segment.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto peer = ShmSegment::Open(name, 2, kSlot, 7, 9, 1);
    if (!peer.ok()) _exit(1);
    std::memcpy((*peer)->Half(1, 0), "hello", 6);
    const uint64_t n = (*peer)->Arrive();
    const absl::Status s = (*peer)->Await(n, Clock::Real()->Now() + absl::Seconds(30),
                                          Clock::Real(), "child barrier", absl::OkStatus());
    _exit(s.ok() ? 0 : 2);
  }
  const uint64_t n = (*segment)->Arrive();
  const absl::Status s = (*segment)->Await(n, Clock::Real()->Now() + absl::Seconds(30),
                                           Clock::Real(), "barrier", absl::OkStatus());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_STREQ((*segment)->Half(1, 0), "hello");
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ShmSegment::Unlink(name);
}

TEST(ShmSegmentTest, AWaitEndsNamingAPeerWhoseProcessIsGone) {
  const std::string name = UniqueName();
  auto segment = ShmSegment::Create(name, 2, kSlot, 7, 9, 0);
  ASSERT_TRUE(segment.ok()) << segment.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto peer = ShmSegment::Open(name, 2, kSlot, 7, 9, 1);
    _exit(peer.ok() ? 0 : 1);  // maps the segment, then dies without arriving
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ShmSegment::Unlink(name);
  const uint64_t n = (*segment)->Arrive();
  // The deadline is far: only the dead peer can end this wait.
  const absl::Status s = (*segment)->Await(n, Clock::Real()->Now() + absl::Seconds(60),
                                           Clock::Real(), "bucket 2", absl::OkStatus());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("bucket 2: peer rank 1 (pid ", child,
                                                  ") is gone")));
  const v1::RankFailure failure = FailureOf(s);
  EXPECT_EQ(failure.kind(), v1::RankFailure::PEER_CLOSED);
  EXPECT_TRUE(failure.has_peer());
  EXPECT_EQ(failure.peer_rank(), 1u);
}

TEST(ShmSegmentTest, ASegmentThatIsNotTheOneAnnouncedIsRefused) {
  const std::string name = UniqueName();
  auto segment = ShmSegment::Create(name, 2, kSlot, 7, 9, 0);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto wrong_token = ShmSegment::Open(name, 2, kSlot, 7, 10, 1);
  EXPECT_EQ(wrong_token.status().code(), absl::StatusCode::kFailedPrecondition);
  auto wrong_size = ShmSegment::Open(name, 3, kSlot, 7, 9, 1);
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kFailedPrecondition);
  ShmSegment::Unlink(name);
  auto gone = ShmSegment::Open(name, 2, kSlot, 7, 9, 1);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  EXPECT_THAT(gone.status().message(), HasSubstr("shm_open " + name));
}

}  // namespace
}  // namespace ringleader
