// The job spec's word-valued choices as C++ enums: read here, once, so no other code compares
// the words. The YAML and the proto keep the words ("ddp", "nccl", ...); an empty word is the
// field's default.
//
//   Parse*(word)  every word the spec accepts, or INVALID_ARGUMENT naming the field and the
//                 words it takes (ValidateJobSpec uses them; an empty word is refused too: the
//                 caller decides whether the field may be left out).
//   *Of(spec)     the value of a validated spec (an unknown word, which ValidateJobSpec never
//                 lets through, reads as the default).
//   Name(value)   the word again, for logs and messages.
#ifndef RINGLEADER_COMMON_SPEC_KINDS_H_
#define RINGLEADER_COMMON_SPEC_KINDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// JobSpec.strategy: how the data-parallel state is split across ranks (docs/strategies.md).
enum class Strategy { kDdp, kZero1, kZero2, kFsdp };
// JobSpec.backend: gloo (CPU, TCP or shared memory) or nccl (GPU).
enum class Backend { kGloo, kNccl };
// JobSpec.checkpoint_format: one file gathered to rank 0, or one shard per rank + manifest.
enum class CheckpointFormat { kConsolidated, kSharded };
// JobSpec.sync.comm_dtype and JobSpec.mixed_precision.
enum class Precision { kFp32, kBf16 };

absl::StatusOr<Strategy> ParseStrategy(absl::string_view word);
absl::StatusOr<Backend> ParseBackend(absl::string_view word);
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view word);
// `field` names the spec field in the error ("sync.comm_dtype", "mixed_precision").
absl::StatusOr<Precision> ParsePrecision(absl::string_view field, absl::string_view word);

Strategy StrategyOf(const v1::JobSpec& spec);
Backend BackendOf(const v1::JobSpec& spec);
CheckpointFormat CheckpointFormatOf(const v1::JobSpec& spec);
Precision CommDtypeOf(const v1::JobSpec& spec);
Precision MixedPrecisionOf(const v1::JobSpec& spec);

std::string Name(Strategy strategy);
std::string Name(Backend backend);
std::string Name(CheckpointFormat format);
std::string Name(Precision precision);

// What a strategy splits across ranks (the one table every layer reads: validation, the
// memory plan, the parameter plan, checkpoints).
struct StrategyTraits {
  bool shards_optimizer_state = false;  // zero1, zero2, fsdp: each rank steps its own elements
  bool shards_gradients = false;        // zero2, fsdp: buckets reduce-scattered into shards
  bool shards_parameters = false;       // fsdp: layers gathered as they run
  // For messages: "optimizer state", "gradients and optimizer state", ...
  const char* sharded_state = "";
};
const StrategyTraits& TraitsOf(Strategy strategy);

// Every strategy, in the order tables list them (ddp first).
const std::vector<Strategy>& AllStrategies();

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_SPEC_KINDS_H_
