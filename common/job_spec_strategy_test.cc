// The strategies' and checkpoints' rules of ValidateJobSpec: which combinations zero1, zero2 and
// fsdp run with, and what each refusal names; init_optimizer_state and checkpoint_format.
#include <string>

#include "absl/status/status.h"
#include "common/job_spec.h"
#include "common/job_spec_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

using ::ringleader::v1::JobSpec;
using ::testing::HasSubstr;
using job_spec_testing::ExpectInvalid;
using job_spec_testing::ValidSpec;

TEST(ValidateJobSpecTest, Zero1IsAcceptedForTheBuiltInTrainerOnGlooAndNccl) {
  for (const char* backend : {"gloo", "nccl"}) {
    JobSpec spec = ValidSpec();
    spec.set_backend(backend);
    spec.set_strategy("zero1");
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << backend << ": " << ValidateJobSpec(spec);
    // With checkpoints, accumulation, frozen parameters: the checkpoint holds the gathered
    // state.
    spec.set_checkpoint_dir("/srv/ringleader/checkpoints");
    spec.set_checkpoint_interval_steps(10);
    spec.mutable_sync()->set_gradient_accumulation_steps(2);
    spec.mutable_model()->add_frozen_parameters("fc1.weight");
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << backend << ": " << ValidateJobSpec(spec);
    spec = ValidSpec();
    spec.set_backend(backend);
    spec.set_strategy("ddp");
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << backend << ": " << ValidateJobSpec(spec);
  }
  // The GPU trainer's bf16 mixed precision keeps fp32 master weights, which zero1 shards.
  JobSpec spec = ValidSpec();
  spec.set_backend("nccl");
  spec.set_strategy("zero1");
  spec.set_mixed_precision("bf16");
  spec.mutable_sync()->set_comm_dtype("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, Zero1IsRefusedForCommandJobsNamingTheFix) {
  JobSpec spec = ValidSpec();
  spec.set_strategy("zero1");
  spec.add_command("/usr/bin/python3");
  ExpectInvalid(spec, "strategy: zero1 shards the built-in trainer's optimizer state, and a "
                      "command job runs your own program; drop strategy");
  spec.set_strategy("ddp");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, Zero2IsAcceptedOnGlooWithCheckpointsAndFrozenParameters) {
  JobSpec spec = ValidSpec();
  spec.set_strategy("zero2");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.set_checkpoint_dir("/srv/ringleader/checkpoints");
  spec.set_checkpoint_interval_steps(10);
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  spec.mutable_sync()->set_overlap(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, Zero2RefusesWhatItDoesNotRunNamingFieldAndFix) {
  JobSpec spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.set_backend("nccl");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << "zero2 runs on the GPU trainer too: "
                                          << ValidateJobSpec(spec);
  spec.set_mixed_precision("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);

  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.add_command("/usr/bin/python3");
  ExpectInvalid(spec, "strategy: zero2 shards the built-in trainer's gradients and optimizer "
                      "state, and a command job runs your own program");

  // Accumulation and unused parameters run under zero2.
  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.mutable_sync()->set_gradient_accumulation_steps(4);
  spec.mutable_sync()->set_find_unused_parameters(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);

  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.mutable_sync()->set_comm_dtype("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);


  // Buckets below one float per rank: refused, naming the smallest cap that works.
  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.set_world_size(8);
  spec.mutable_sync()->set_bucket_cap_mb(16.0 / (1 << 20));  // 4 floats
  ExpectInvalid(spec, "sync.bucket_cap_mb: strategy zero2 splits every bucket into world_size "
                      "slices, and 1.52588e-05 MB holds 4.0 floats, fewer than the 8 ranks; set "
                      "it to at least 3.05176e-05");
  spec.mutable_sync()->set_bucket_cap_mb(32.0 / (1 << 20));  // 8 floats: one per rank
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.set_strategy("ddp");
  spec.mutable_sync()->set_bucket_cap_mb(16.0 / (1 << 20));
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << "ddp all-reduces whole buckets";

  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.mutable_sync()->set_rebuild_buckets(true);
  ExpectInvalid(spec, "sync.rebuild_buckets: strategy zero2 keeps its initial buckets");

  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.mutable_sync()->set_overlap(false);
  ExpectInvalid(spec, "sync.overlap: strategy zero2 reduce-scatters each bucket during backward");

  for (bool all_ranks : {false, true}) {
    spec = ValidSpec();
    spec.set_strategy("zero2");
    if (all_ranks) {
      spec.mutable_model()->mutable_faults()->set_bypass_sync_all_ranks(true);
    } else {
      spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
    }
    ExpectInvalid(spec, "model.faults.bypass_sync: strategy zero2 has no full local gradients");
  }

  // The same settings are fine under the other strategies (their refusals are zero2's alone).
  for (const char* strategy : {"ddp", "zero1"}) {
    spec = ValidSpec();
    spec.set_strategy(strategy);
    spec.mutable_sync()->set_gradient_accumulation_steps(4);
    spec.mutable_sync()->set_find_unused_parameters(true);
    spec.mutable_sync()->set_rebuild_buckets(true);
    spec.mutable_sync()->set_overlap(false);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << strategy << ": " << ValidateJobSpec(spec);
  }
}

TEST(ValidateJobSpecTest, FsdpIsAcceptedOnGlooWithCheckpoints) {
  JobSpec spec = ValidSpec();
  spec.set_strategy("fsdp");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.set_checkpoint_dir("/srv/ringleader/checkpoints");
  spec.set_checkpoint_interval_steps(10);
  spec.mutable_sync()->set_overlap(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

// Everything zero2 refuses, named as fsdp's, plus frozen parameters and model buffers.
TEST(ValidateJobSpecTest, FsdpRefusesWhatItDoesNotRunNamingFieldAndFix) {
  JobSpec spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.set_backend("nccl");
  spec.set_mixed_precision("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << "fsdp runs on the GPU trainer too, in bf16 too: "
                                          << ValidateJobSpec(spec);

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.add_command("/usr/bin/python3");
  ExpectInvalid(spec, "strategy: fsdp shards the built-in trainer's parameters, gradients and "
                      "optimizer state, and a command job runs your own program");

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_sync()->set_gradient_accumulation_steps(4);
  spec.mutable_sync()->set_find_unused_parameters(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_sync()->set_comm_dtype("bf16");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);


  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_sync()->set_rebuild_buckets(true);
  ExpectInvalid(spec, "sync.rebuild_buckets: strategy fsdp keeps its initial buckets");

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_sync()->set_overlap(false);
  ExpectInvalid(spec, "sync.overlap: strategy fsdp reduce-scatters each bucket during backward");

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  ExpectInvalid(spec, "model.faults.bypass_sync: strategy fsdp has no full local gradients");

  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << "fsdp takes frozen parameters: "
                                          << ValidateJobSpec(spec);

  // Buffers stay whole on every rank under fsdp.
  spec = ValidSpec();
  spec.set_strategy("fsdp");
  spec.mutable_model()->set_with_buffers(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);

  // zero2 still takes frozen parameters and buffers.
  spec = ValidSpec();
  spec.set_strategy("zero2");
  spec.mutable_model()->add_frozen_parameters("fc1.weight");
  spec.mutable_model()->set_with_buffers(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, InitOptimizerStateNeedsARingleaderCheckpoint) {
  JobSpec spec = ValidSpec();
  spec.mutable_model()->set_init_optimizer_state(true);
  ExpectInvalid(spec, "model.init_optimizer_state: needs model.init_from naming a ringleader "
                      "checkpoint (whose momentum it loads); set init_from or drop "
                      "init_optimizer_state");
  spec.mutable_model()->set_init_from("/shared/weights.safetensors");
  ExpectInvalid(spec, "model.init_optimizer_state: model.init_from /shared/weights.safetensors "
                      "is a .safetensors file, which holds parameters only; name a ringleader "
                      "checkpoint");
  spec.mutable_model()->set_init_from("/shared/checkpoints/job-1/final.ckpt");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_optimizer()->set_momentum(0);
  ExpectInvalid(spec, "model.init_optimizer_state: optimizer.momentum is 0");
  // Another strategy and world size than the checkpoint's job are the point: accepted.
  spec = ValidSpec();
  spec.set_world_size(4);
  spec.set_strategy("zero2");
  spec.mutable_model()->set_init_from("/shared/checkpoints/job-1/final.ckpt");
  spec.mutable_model()->set_init_optimizer_state(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, CheckpointFormat) {
  JobSpec spec = ValidSpec();
  spec.set_checkpoint_format("zip");
  ExpectInvalid(spec, "checkpoint_format: unknown format 'zip' (expected consolidated or sharded)");
  spec.set_checkpoint_format("sharded");
  ExpectInvalid(spec,
                "checkpoint_format: sharded: ddp holds everything on every rank; use consolidated");
  spec.set_checkpoint_format("consolidated");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  for (const char* strategy : {"zero1", "zero2", "fsdp"}) {
    spec = ValidSpec();
    spec.set_strategy(strategy);
    spec.set_checkpoint_format("sharded");
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << strategy << ": " << ValidateJobSpec(spec);
  }
}

}  // namespace
}  // namespace ringleader
