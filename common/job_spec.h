// The job spec (`ringleader.v1.JobSpec`): defaults, validation and fingerprint.
//
// Used by the client (fail early, before anything is sent) and by the coordinator (the
// authority: SubmitJob answers INVALID_ARGUMENT with the same messages).
#ifndef RINGLEADER_COMMON_JOB_SPEC_H_
#define RINGLEADER_COMMON_JOB_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Where `data.path` points when a fashion-mnist spec leaves it empty (Debian's package path).
inline constexpr char kDefaultFashionMnistPath[] = "/usr/share/datasets/fashion-mnist";

// checks.preflight_min_fraction when a spec with checks.preflight leaves it unset (and a doctor
// run's): a worker below half the median matmul rate is named.
inline constexpr double kDefaultPreflightMinFraction = 0.5;

// model.kind of a doctor run's job (the coordinator makes it; SubmitJob refuses it): its ranks
// run the pre-flight check instead of training.
inline constexpr char kPreflightModelKind[] = "preflight";

// Limits on a spec. Plain struct; defaults commented.
struct JobSpecLimits {
  uint32_t max_world_size = 1024;      // ranks per job
  uint32_t max_layers = 16;            // MLP linear layers (layer sizes - 1)
  uint32_t max_layer_width = 1 << 16;  // neurons per layer
  uint32_t max_batch_size = 1 << 16;
  uint32_t max_epochs = 10000;
  size_t max_spec_bytes = size_t{1} << 20;  // the serialized spec (command and env included)
  size_t max_path_bytes = 4096;             // checkpoint_dir, data.path, model.init_from
  double max_bucket_mb = 4096;              // sync.bucket_cap_mb and sync.first_bucket_mb
};

// Fills every unset field with its documented default (docs/job-spec.md):
// backend "gloo", strategy "ddp", model mlp 784-256-128-10, dataset fashion-mnist at the Debian
// path, sgd lr 0.05 momentum 0.9 weight_decay 5e-4 dampening 0, bucket_cap_mb 25,
// first_bucket_mb 1, broadcast_buffers true, overlap true, shared_memory true, accumulation 1,
// comm_dtype fp32,
// epochs 3, batch 64, seed 1, drift every 50 steps, collective timeout 60 s.
// Numeric and boolean fields are proto3 `optional` and filled only when unset, so an explicit
// momentum 0 stays 0 and an explicit epochs 0 is reported by ValidateJobSpec; strings are filled
// when empty. Never filled: `world_size` (0 stays an error: the
// submitter chooses), `name`, `max_steps`, `checkpoint_dir`, `mixed_precision` ("" = fp32).
// Idempotent.
void ApplyJobSpecDefaults(ringleader::v1::JobSpec* spec);

// Checks a spec (after defaults). INVALID_ARGUMENT naming the field (YAML path style, e.g.
// "optimizer.learning_rate") and the fix; OK otherwise. Does not touch the file system.
absl::Status ValidateJobSpec(const ringleader::v1::JobSpec& spec, const JobSpecLimits& limits = {});

// What the spec's strategy runs with today (common/spec_kinds.h TraitsOf); OK for ddp.
// INVALID_ARGUMENT naming the field and the fix, the strategy named in the message: a command
// job under any sharding strategy; under zero2 and fsdp (fixed reduce-scattered buckets) also
// sync.rebuild_buckets, sync.overlap false, a bucket cap below one float per rank and the
// bypass_sync faults. Part of ValidateJobSpec; the rank checks it again before training.
absl::Status ValidateStrategyCombination(const ringleader::v1::JobSpec& spec);

// Parameter names of the model `model` describes, in registration order: for an MLP with
// layers [784, 256, 10]: fc1.weight, fc1.bias, fc2.weight, fc2.bias. Empty for an unknown kind
// or fewer than 2 layer sizes.
std::vector<std::string> ModelParameterNames(const ringleader::v1::ModelSpec& model);

// 16 hex digits: FNV-1a 64 of the deterministic serialization. Equal specs give equal
// fingerprints in every process.
std::string JobSpecFingerprint(const ringleader::v1::JobSpec& spec);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_JOB_SPEC_H_
