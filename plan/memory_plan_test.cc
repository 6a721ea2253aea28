#include "plan/memory_plan.h"

#include <string>

#include "common/job_spec.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

// layers [4, 3, 2]: P = 4*3 + 3 + 3*2 + 2 = 23, the largest layer fc1 (15 elements).
v1::JobSpec SmallSpec(uint32_t world_size = 2) {
  v1::JobSpec spec;
  spec.set_world_size(world_size);
  spec.mutable_data()->set_dataset("synthetic");
  for (uint32_t width : {4u, 3u, 2u}) spec.mutable_model()->add_layers(width);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

v1::RankMemory Predict(const v1::JobSpec& spec, const std::string& strategy, uint32_t world,
                       uint32_t rank) {
  absl::StatusOr<v1::RankMemory> memory = PredictRankMemory(spec, strategy, world, rank);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return memory.ok() ? *memory : v1::RankMemory();
}

void ExpectBytes(const v1::RankMemory& memory, uint64_t parameters, uint64_t gradients,
                 uint64_t optimizer, uint64_t comm) {
  EXPECT_EQ(memory.parameter_bytes(), parameters);
  EXPECT_EQ(memory.gradient_bytes(), gradients);
  EXPECT_EQ(memory.optimizer_bytes(), optimizer);
  EXPECT_EQ(memory.comm_buffer_bytes(), comm);
  EXPECT_EQ(memory.total_bytes(), parameters + gradients + optimizer + comm);
}

TEST(MemoryPlanTest, CountsTheMlpLikeTheTrainer) {
  v1::JobSpec spec = SmallSpec();
  ModelElementCounts counts = CountModelElements(spec.model());
  EXPECT_EQ(counts.parameters, 23u);
  EXPECT_EQ(counts.trainable, 23u);
  EXPECT_EQ(counts.largest_layer, 15u);
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  counts = CountModelElements(spec.model());
  EXPECT_EQ(counts.parameters, 23u);
  EXPECT_EQ(counts.trainable, 11u);
}

TEST(MemoryPlanTest, DdpByHand) {
  v1::JobSpec spec = SmallSpec();
  // 23 parameters, 23 + 1 arena floats, 23 momentum floats.
  ExpectBytes(Predict(spec, "ddp", 2, 0), 92, 96, 92, 0);
  ExpectBytes(Predict(spec, "ddp", 2, 1), 92, 96, 92, 0);
  spec.mutable_optimizer()->set_momentum(0);
  ExpectBytes(Predict(spec, "ddp", 2, 0), 92, 96, 0, 0);
  spec.mutable_sync()->set_comm_dtype("bf16");
  ExpectBytes(Predict(spec, "ddp", 2, 0), 92, 96, 0, 48);  // bf16 copy of the 24-float arena
}

TEST(MemoryPlanTest, Zero1ByHand) {
  v1::JobSpec spec = SmallSpec();
  // Shards of 23 over 2 ranks: rank 0 [0, 11), rank 1 [11, 23); C = 12, gather 12 + 2 x 12.
  ExpectBytes(Predict(spec, "zero1", 2, 0), 92, 96, 44, 144);
  ExpectBytes(Predict(spec, "zero1", 2, 1), 92, 96, 48, 144);
  spec.mutable_optimizer()->set_momentum(0);
  ExpectBytes(Predict(spec, "zero1", 2, 1), 92, 96, 0, 144);
  spec.mutable_sync()->set_comm_dtype("bf16");
  ExpectBytes(Predict(spec, "zero1", 2, 1), 92, 96, 0, 144 + 48);
}

TEST(MemoryPlanTest, Zero2AndFsdpByHand) {
  v1::JobSpec spec = SmallSpec();
  // zero2, one bucket of 23 (first bucket 1 MiB) in reverse registration order fc2.bias 2,
  // fc2.weight 6, fc1.bias 3, fc1.weight 12, padded to 24: slices of 12. Rank 0 owns bucket
  // elements [0, 12) (12 real), rank 1 [12, 23) (11). Shard 12 + a pool of ONE buffer of 24
  // (one bucket); gather chunk min(12, 2^18) x (2 + 1).
  ExpectBytes(Predict(spec, "zero2", 2, 0), 92, 4 * (12 + 24), 48, 4 * 12 * 3);
  ExpectBytes(Predict(spec, "zero2", 2, 1), 92, 4 * (12 + 24), 44, 4 * 12 * 3);
  // fsdp: zero2's gradients and optimizer; parameters: the shard (12) and the one bucket both
  // layers lie in, staged (24); no communication buffer.
  ExpectBytes(Predict(spec, "fsdp", 2, 0), 4 * (12 + 24), 4 * (12 + 24), 48, 0);
  ExpectBytes(Predict(spec, "fsdp", 2, 1), 4 * (12 + 24), 4 * (12 + 24), 44, 0);
  // Buckets of 40 bytes = 10 elements: [fc2.bias fc2.weight fc1.bias] = 11, [fc1.weight] = 12;
  // slices 6 and 6 (padded 12, 12): shard 12, pool 2 x 12. Rank 0: 2 + 4 + 6 = 12 owned,
  // rank 1: 2 + 3 + 6 = 11.
  spec.mutable_sync()->set_bucket_cap_mb(40.0 / (1 << 20));
  spec.mutable_sync()->set_first_bucket_mb(40.0 / (1 << 20));
  ExpectBytes(Predict(spec, "zero2", 2, 0), 92, 4 * (12 + 24), 48, 4 * 12 * 3);
  ExpectBytes(Predict(spec, "zero2", 2, 1), 92, 4 * (12 + 24), 44, 4 * 12 * 3);
  // fsdp: layer 1 (fc1) straddles both buckets: staging 12 + 12; layer 2 only the first (12).
  ExpectBytes(Predict(spec, "fsdp", 2, 0), 4 * (12 + 24), 4 * (12 + 24), 48, 0);
  // bf16 communication: a bf16 copy of each pool buffer and a bf16 shard, 2 x (24 + 12) bytes.
  spec.mutable_sync()->set_comm_dtype("bf16");
  ExpectBytes(Predict(spec, "zero2", 2, 0), 92, 4 * (12 + 24), 48, 4 * 12 * 3 + 2 * (24 + 12));
  ExpectBytes(Predict(spec, "fsdp", 2, 0), 4 * (12 + 24), 4 * (12 + 24), 48, 2 * (24 + 12));
}

TEST(MemoryPlanTest, FrozenParametersHaveNoGradientOrOptimizerState) {
  v1::JobSpec spec = SmallSpec();
  spec.mutable_model()->add_frozen_parameters("fc1.weight");  // T = 11
  ExpectBytes(Predict(spec, "ddp", 2, 0), 92, 48, 44, 0);
  // zero1: shards of 11: rank 0 5, rank 1 6; C = 6.
  ExpectBytes(Predict(spec, "zero1", 2, 0), 92, 48, 20, 72);
  // fsdp shards every parameter, the frozen one too: the bucket of 23 (reverse registration
  // order: fc2.bias, fc2.weight, fc1.bias, fc1.weight) in slices of 12. Rank 0 owns fc2's 8,
  // fc1.bias's 3 and one element of fc1.weight (frozen: no momentum), rank 1 the rest of
  // fc1.weight: momentum for 11 and 0 elements.
  ExpectBytes(Predict(spec, "fsdp", 2, 0), 4 * (12 + 24), 4 * (12 + 24), 44, 0);
  ExpectBytes(Predict(spec, "fsdp", 2, 1), 4 * (12 + 24), 4 * (12 + 24), 0, 0);
}

TEST(MemoryPlanTest, PlanTakesTheLargestRankAndMarksAvailability) {
  v1::JobSpec spec = SmallSpec();
  absl::StatusOr<v1::MemoryPlan> plan = PlanMemory(spec, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size(), 2u);
  EXPECT_EQ(plan->parameters(), 23u);
  EXPECT_EQ(plan->spec_strategy(), "ddp");
  ASSERT_EQ(plan->strategies_size(), 4);
  EXPECT_EQ(plan->strategies(0).strategy(), "ddp");
  EXPECT_EQ(plan->strategies(0).memory().total_bytes(), 280u);
  EXPECT_DOUBLE_EQ(plan->strategies(0).vs_ddp(), 1.0);
  EXPECT_TRUE(plan->strategies(0).available());
  EXPECT_EQ(plan->strategies(1).strategy(), "zero1");
  EXPECT_EQ(plan->strategies(1).memory().optimizer_bytes(), 48u);  // rank 1's larger shard
  EXPECT_DOUBLE_EQ(plan->strategies(1).vs_ddp(), (92.0 + 96 + 48 + 144) / 280);
  EXPECT_TRUE(plan->strategies(1).available());
  EXPECT_EQ(plan->strategies(2).strategy(), "zero2");
  EXPECT_TRUE(plan->strategies(2).available()) << "zero2 runs on gloo";
  EXPECT_EQ(plan->strategies(2).note(), "");
  EXPECT_EQ(plan->strategies(3).strategy(), "fsdp");
  EXPECT_TRUE(plan->strategies(3).available()) << "fsdp runs on gloo";
  EXPECT_EQ(plan->strategies(3).note(), "");
  // Both take frozen parameters.
  v1::JobSpec frozen = spec;
  frozen.mutable_model()->add_frozen_parameters("fc1.bias");
  plan = PlanMemory(frozen, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->strategies(2).available());
  EXPECT_TRUE(plan->strategies(3).available());

  // zero2 is refused with settings it does not run with: the note names the field.
  v1::JobSpec rebuilding = spec;
  rebuilding.mutable_sync()->set_rebuild_buckets(true);
  plan = PlanMemory(rebuilding, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->strategies(2).available());
  EXPECT_EQ(plan->strategies(2).note(), "not with sync.rebuild_buckets");
  EXPECT_EQ(plan->strategies(3).note(), "not with sync.rebuild_buckets");

  // Accumulation runs, with a second gradient shard receiving the later micro-batches.
  v1::JobSpec accumulating = spec;
  accumulating.mutable_sync()->set_gradient_accumulation_steps(2);
  absl::StatusOr<v1::MemoryPlan> single = PlanMemory(spec, 2);
  plan = PlanMemory(accumulating, 2);
  ASSERT_TRUE(plan.ok() && single.ok());
  for (int s = 2; s <= 3; ++s) {
    EXPECT_TRUE(plan->strategies(s).available()) << plan->strategies(s).note();
    const uint64_t extra = plan->strategies(s).memory().gradient_bytes() -
                           single->strategies(s).memory().gradient_bytes();
    EXPECT_GT(extra, 0u) << plan->strategies(s).strategy();
    EXPECT_LT(extra, single->strategies(s).memory().gradient_bytes())
        << "one shard, less than the shard and the pool";
    EXPECT_EQ(extra % 4, 0u);
  }

  // Every strategy runs on the GPU trainer too.
  spec.set_backend("nccl");
  plan = PlanMemory(spec, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int s = 1; s <= 3; ++s) {
    EXPECT_TRUE(plan->strategies(s).available()) << plan->strategies(s).strategy();
    EXPECT_EQ(plan->strategies(s).note(), "") << plan->strategies(s).strategy();
  }
  spec.mutable_sync()->set_rebuild_buckets(true);
  plan = PlanMemory(spec, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->strategies(2).note(), "not with sync.rebuild_buckets");
}

// The bar: ZeRO-2 at 4 ranks holds <= 40% of DDP's optimizer + gradient memory, for a
// model of ~50 M parameters. zero2 keeps two buckets of full gradients (the one backward writes,
// the one being reduce-scattered), and a bucket holds at least its largest parameter, so the
// bar needs buckets small next to the model: 13 layers of 2048 x 2048 (4.2 M elements each)
// with sync.bucket_cap_mb 16 (one layer per bucket). (A 4096-wide model of three 16.8 M-element
// layers cannot meet it: two such gradients alone are 67% of T.)
TEST(MemoryPlanTest, Zero2AtFourRanksHoldsAtMostFortyPercentOfDdpsOptimizerAndGradients) {
  v1::JobSpec spec = SmallSpec(4);
  spec.mutable_model()->clear_layers();
  for (int k = 0; k < 14; ++k) spec.mutable_model()->add_layers(2048);
  spec.mutable_sync()->set_bucket_cap_mb(16);
  spec.set_strategy("zero2");
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  const ModelElementCounts counts = CountModelElements(spec.model());
  EXPECT_GT(counts.parameters, 45'000'000u);
  EXPECT_LT(counts.parameters, 55'000'000u);
  absl::StatusOr<v1::MemoryPlan> plan = PlanMemory(spec, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::RankMemory& ddp = plan->strategies(0).memory();
  const v1::RankMemory& zero2 = plan->strategies(2).memory();
  const double ddp_state = ddp.optimizer_bytes() + ddp.gradient_bytes();
  const double zero2_state = zero2.optimizer_bytes() + zero2.gradient_bytes();
  EXPECT_LE(zero2_state, 0.40 * ddp_state) << zero2_state / ddp_state;
  EXPECT_TRUE(plan->strategies(2).available());
  // fsdp holds less than zero2 in all.
  EXPECT_LT(plan->strategies(3).memory().total_bytes(), zero2.total_bytes());
}

TEST(MemoryPlanTest, ErrorsNameTheField) {
  const v1::JobSpec spec = SmallSpec();
  EXPECT_NE(PredictRankMemory(spec, "zero3", 2, 0).status().message().find("strategy"),
            std::string::npos);
  EXPECT_NE(PredictRankMemory(spec, "ddp", 0, 0).status().message().find("world_size"),
            std::string::npos);
  EXPECT_NE(PredictRankMemory(spec, "ddp", 2, 2).status().message().find("rank"),
            std::string::npos);
  v1::JobSpec command = spec;
  command.add_command("/bin/true");
  EXPECT_NE(PlanMemory(command, 2).status().message().find("command"), std::string::npos);
}

TEST(MemoryPlanTest, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(94106), "91.9 KiB");
  EXPECT_EQ(FormatBytes(940584), "919 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 20), "3.00 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{4} << 30), "4.00 GiB");
}

}  // namespace
}  // namespace ringleader
