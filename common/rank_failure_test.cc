#include "common/rank_failure.h"

#include "absl/strings/cord.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using Kind = v1::RankFailure;

v1::RankFailure Failure(v1::RankFailure::Kind kind) {
  v1::RankFailure failure;
  failure.set_kind(kind);
  return failure;
}

TEST(RankFailureTest, AttachedFailureReadsBackWithItsFields) {
  v1::RankFailure failure = Failure(Kind::PEER_CLOSED);
  failure.set_has_peer(true);
  failure.set_peer_rank(3);
  failure.set_peer_address("10.1.0.2:41729");
  const absl::Status status = WithRankFailure(absl::UnavailableError("closed"), failure);
  ASSERT_TRUE(RankFailureOf(status).has_value());
  EXPECT_EQ(RankFailureOf(status)->kind(), Kind::PEER_CLOSED);
  EXPECT_EQ(RankFailureOf(status)->peer_rank(), 3u);
  EXPECT_EQ(RankFailureOf(status)->peer_address(), "10.1.0.2:41729");
  // Code and message are untouched: the text users see stays as it was.
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "closed");
}

TEST(RankFailureTest, NoPayloadOkStatusAndGarbageReadAsNone) {
  EXPECT_FALSE(RankFailureOf(absl::InternalError("x")).has_value());
  EXPECT_EQ(FailureOf(absl::InternalError("x")).kind(), Kind::KIND_UNSPECIFIED);
  const absl::Status ok = WithRankFailure(absl::OkStatus(), Failure(Kind::JOB_ERROR));
  EXPECT_TRUE(ok.ok());
  EXPECT_FALSE(RankFailureOf(ok).has_value());
  absl::Status garbage = absl::InternalError("x");
  garbage.SetPayload(kRankFailureUrl, absl::Cord("\xff\xff\xff"));
  EXPECT_FALSE(RankFailureOf(garbage).has_value());
}

TEST(RankFailureTest, WithRankFailureReplacesAndAddRankFailureKeepsTheDetectionSitesFacts) {
  absl::Status status = WithFailureKind(absl::UnavailableError("gone"), Kind::PEER_CLOSED, 1,
                                        "127.0.0.1:4000");
  v1::RankFailure higher_up = Failure(Kind::INTERNAL);
  higher_up.set_has_peer(true);
  higher_up.set_peer_rank(2);
  higher_up.set_step(12);
  higher_up.set_has_collective(true);
  higher_up.set_collective_sequence(42);
  higher_up.set_bucket(3);
  status = AddRankFailure(status, higher_up);
  v1::RankFailure merged = FailureOf(status);
  EXPECT_EQ(merged.kind(), Kind::PEER_CLOSED);  // kept
  EXPECT_EQ(merged.peer_rank(), 1u);            // kept
  EXPECT_EQ(merged.peer_address(), "127.0.0.1:4000");
  EXPECT_EQ(merged.step(), 12u);  // added
  EXPECT_TRUE(merged.has_collective());
  EXPECT_EQ(merged.collective_sequence(), 42u);
  EXPECT_EQ(merged.bucket(), 3);

  status = WithRankFailure(status, Failure(Kind::STOPPED));
  EXPECT_EQ(FailureOf(status).kind(), Kind::STOPPED);
  EXPECT_FALSE(FailureOf(status).has_peer());
}

TEST(RankFailureTest, AddRankFailureOnAnUnclassifiedStatusAttachesIt) {
  const absl::Status status = WithFailureKind(absl::InvalidArgumentError("spec"), Kind::JOB_ERROR);
  EXPECT_EQ(FailureOf(status).kind(), Kind::JOB_ERROR);
  EXPECT_FALSE(FailureOf(status).has_peer());
}

TEST(RankFailureTest, ThePayloadSurvivesWithPrefix) {
  const absl::Status status =
      WithPrefix(WithFailureKind(absl::DeadlineExceededError("t"), Kind::PEER_TIMED_OUT), "x: ");
  EXPECT_EQ(status.message(), "x: t");
  EXPECT_EQ(FailureOf(status).kind(), Kind::PEER_TIMED_OUT);
}

TEST(RankFailureTest, PeerSymptomsAreThePeerKindsOrANamedPeer) {
  EXPECT_TRUE(IsPeerSymptom(Failure(Kind::PEER_CLOSED)));
  EXPECT_TRUE(IsPeerSymptom(Failure(Kind::PEER_TIMED_OUT)));
  EXPECT_TRUE(IsPeerSymptom(Failure(Kind::ABORTED_BY_PEER)));
  for (Kind::Kind own : {Kind::KIND_UNSPECIFIED, Kind::SIGNAL, Kind::OUT_OF_MEMORY,
                         Kind::IO_ERROR, Kind::JOB_ERROR, Kind::STOPPED, Kind::INTERNAL,
                         Kind::EXITED}) {
    EXPECT_FALSE(IsPeerSymptom(Failure(own))) << KindName(own);
  }
  v1::RankFailure named = Failure(Kind::INTERNAL);
  named.set_has_peer(true);
  EXPECT_TRUE(IsPeerSymptom(named));
}

TEST(RankFailureTest, OnlyJobErrorIsAJobError) {
  EXPECT_TRUE(IsJobError(Failure(Kind::JOB_ERROR)));
  EXPECT_FALSE(IsJobError(Failure(Kind::IO_ERROR)));
  EXPECT_FALSE(IsJobError(Failure(Kind::KIND_UNSPECIFIED)));
}

TEST(RankFailureTest, DescribeSaysKindPeerStepAndCollective) {
  v1::RankFailure failure = Failure(Kind::PEER_CLOSED);
  failure.set_has_peer(true);
  failure.set_peer_rank(1);
  failure.set_peer_address("10.1.0.2:41729");
  failure.set_step(12);
  failure.set_has_collective(true);
  failure.set_collective_sequence(42);
  failure.set_bucket(3);
  EXPECT_EQ(Describe(failure),
            "peer closed: peer rank 1 at 10.1.0.2:41729, step 12, collective #42 bucket 3");
  v1::RankFailure killed = Failure(Kind::SIGNAL);
  killed.set_signal(9);
  EXPECT_EQ(Describe(killed), "signal 9");
  EXPECT_EQ(Describe(Failure(Kind::JOB_ERROR)), "job error");
  EXPECT_EQ(Describe(v1::RankFailure()), "unclassified");
}

}  // namespace
}  // namespace ringleader
