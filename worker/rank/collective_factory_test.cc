// WarmUpOperationsFor: the operations an nccl job's connection warm-up issues, per strategy,
// precision and check (the NCCL backend's side is nccl_collective_test).
#include "worker/rank/collective_factory.h"

#include <ostream>
#include <vector>

#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {

// For readable failures.
void PrintTo(const WarmUpOperation& op, std::ostream* os) {
  *os << "{" << CollectiveKindName(op.kind) << ", " << op.elements << " x "
      << DataTypeName(op.dtype) << ", " << ReduceOpName(op.op) << "}";
}

namespace {

using ::testing::ElementsAre;

constexpr size_t kMiBFloats = (1 << 20) / sizeof(float);
// MLP 2048-1024-10: about 8 MiB of fp32 parameters, between the first bucket (1 MiB) and the
// bucket cap (25 MiB).
constexpr size_t kParameters = 2048 * 1024 + 1024 + 1024 * 10 + 10;

// The spec's defaults otherwise: first bucket 1 MiB, bucket cap 25 MiB, fp32 on the wire, the
// drift check every 50 steps.
v1::JobSpec Spec(const char* strategy) {
  v1::JobSpec spec;
  spec.set_backend("nccl");
  spec.set_strategy(strategy);
  for (uint32_t width : {2048u, 1024u, 10u}) spec.mutable_model()->add_layers(width);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

WarmUpOperation Op(CollectiveKind kind, size_t elements, DataType dtype,
                   ReduceOp op = ReduceOp::kSum) {
  return {kind, elements, dtype, op};
}

TEST(WarmUpOperationsForTest, DdpAllReducesTheFirstAndAFullBucket) {
  EXPECT_THAT(
      WarmUpOperationsFor(Spec("ddp"), 4),
      ElementsAre(Op(CollectiveKind::kAllGather, 4, DataType::kFloat32),  // the ledger's summary
                  Op(CollectiveKind::kAllReduce, kMiBFloats, DataType::kFloat32, ReduceOp::kAvg),
                  // The whole model is smaller than a 25 MiB bucket.
                  Op(CollectiveKind::kAllReduce, kParameters, DataType::kFloat32, ReduceOp::kAvg),
                  // The drift check's broadcast of rank 0's parameters.
                  Op(CollectiveKind::kBroadcast, kParameters, DataType::kFloat32)));
}

TEST(WarmUpOperationsForTest, WithoutTheDriftCheckNoBroadcast) {
  v1::JobSpec spec = Spec("ddp");
  spec.set_drift_interval_steps(0);
  for (const WarmUpOperation& op : WarmUpOperationsFor(spec, 4)) {
    EXPECT_NE(op.kind, CollectiveKind::kBroadcast);
  }
}

TEST(WarmUpOperationsForTest, Bf16OnTheWireWarmsUpBf16ReductionsCappedAtABucket) {
  v1::JobSpec spec = Spec("ddp");
  spec.mutable_sync()->set_comm_dtype("bf16");
  spec.mutable_sync()->set_bucket_cap_mb(2);  // smaller than the model
  EXPECT_THAT(WarmUpOperationsFor(spec, 2),
              ElementsAre(Op(CollectiveKind::kAllGather, 2, DataType::kFloat32),
                          Op(CollectiveKind::kAllReduce, kMiBFloats, DataType::kBFloat16,
                             ReduceOp::kAvg),
                          Op(CollectiveKind::kAllReduce, 2 * kMiBFloats, DataType::kBFloat16,
                             ReduceOp::kAvg),
                          Op(CollectiveKind::kBroadcast, 2 * kMiBFloats, DataType::kFloat32)));
}

TEST(WarmUpOperationsForTest, Zero1AlsoGathersTheParameterShardsInChunks) {
  EXPECT_THAT(
      WarmUpOperationsFor(Spec("zero1"), 4),
      ElementsAre(Op(CollectiveKind::kAllGather, 4, DataType::kFloat32),
                  Op(CollectiveKind::kAllReduce, kMiBFloats, DataType::kFloat32, ReduceOp::kAvg),
                  Op(CollectiveKind::kAllReduce, kParameters, DataType::kFloat32, ReduceOp::kAvg),
                  // A quarter of the model per rank is more than one chunk (2^18 elements).
                  Op(CollectiveKind::kAllGather, 4 << 18, DataType::kFloat32),
                  Op(CollectiveKind::kBroadcast, kParameters, DataType::kFloat32)));
  // A shard smaller than a chunk is gathered whole.
  v1::JobSpec no_drift = Spec("zero1");
  no_drift.set_drift_interval_steps(0);
  EXPECT_EQ(WarmUpOperationsFor(no_drift, 16).back(),
            Op(CollectiveKind::kAllGather, (kParameters + 15) / 16 * 16, DataType::kFloat32));
}

TEST(WarmUpOperationsForTest, Zero2ReduceScattersGradientsAndGathersTheShards) {
  EXPECT_THAT(
      WarmUpOperationsFor(Spec("zero2"), 2),
      ElementsAre(
          Op(CollectiveKind::kAllGather, 2, DataType::kFloat32),
          Op(CollectiveKind::kReduceScatter, kMiBFloats, DataType::kFloat32, ReduceOp::kAvg),
          Op(CollectiveKind::kReduceScatter, kParameters, DataType::kFloat32, ReduceOp::kAvg),
          Op(CollectiveKind::kAllGather, 2 << 18, DataType::kFloat32),
          Op(CollectiveKind::kBroadcast, kParameters, DataType::kFloat32)));
}

TEST(WarmUpOperationsForTest, FsdpReduceScattersGradientsAndGathersParameters) {
  v1::JobSpec spec = Spec("fsdp");
  EXPECT_THAT(
      WarmUpOperationsFor(spec, 8),
      ElementsAre(
          Op(CollectiveKind::kAllGather, 8, DataType::kFloat32),
          Op(CollectiveKind::kReduceScatter, kMiBFloats, DataType::kFloat32, ReduceOp::kAvg),
          Op(CollectiveKind::kReduceScatter, kParameters, DataType::kFloat32, ReduceOp::kAvg),
          Op(CollectiveKind::kAllGather, kParameters, DataType::kFloat32),
          Op(CollectiveKind::kBroadcast, kParameters, DataType::kFloat32)));  // the drift check
}

TEST(WarmUpOperationsForTest, NothingIsLargerThanABucketAndDuplicatesAreListedOnce) {
  v1::JobSpec spec = Spec("ddp");
  spec.mutable_model()->clear_layers();
  for (uint32_t width : {4096u, 4096u, 4096u}) spec.mutable_model()->add_layers(width);
  spec.mutable_sync()->set_first_bucket_mb(25);  // = the cap: one bucket size
  spec.set_drift_interval_steps(10);
  EXPECT_THAT(
      WarmUpOperationsFor(spec, 2),
      ElementsAre(Op(CollectiveKind::kAllGather, 2, DataType::kFloat32),
                  Op(CollectiveKind::kAllReduce, 25 * kMiBFloats, DataType::kFloat32,
                     ReduceOp::kAvg),
                  // 33.6M parameters, broadcast for the drift check: capped at a bucket.
                  Op(CollectiveKind::kBroadcast, 25 * kMiBFloats, DataType::kFloat32)));
}

}  // namespace
}  // namespace ringleader
