// Fuzz target: the checkpoint reader (checkpoint/checkpoint.h) and what a rank does with
// what it read (resume: RestoreTrainingState; init_from: ReadInitialWeights, LoadInitialWeights).
//
// Input: the bytes of a checkpoint file. Each input is read twice: as it is, and with its last 4
// bytes replaced by the right CRC-32, so that mutations get past the checksum to the parser.
// Holds: only the documented error codes; a checkpoint read is consistent (unique names, every
// tensor's shape product, without overflow, is its value count) and survives a write and a
// read back unchanged; the header fingerprint is the one ReadCheckpoint reads.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/sharded_checkpoint.h"
#include "fuzz/fuzz_util.h"
#include "worker/checkpoint/initial_weights.h"
#include "worker/checkpoint/training_state.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

using fuzz::CodeIn;
using fuzz::SameBits;
using fuzz::ShapeHolds;


void CheckSame(const CheckpointData& a, const CheckpointData& b) {
  FUZZ_CHECK(a.step == b.step && a.epoch == b.epoch, "step/epoch changed in a round trip");
  FUZZ_CHECK(a.spec_fingerprint == b.spec_fingerprint, "fingerprint changed in a round trip");
  FUZZ_CHECK(a.attributes == b.attributes, "attributes changed in a round trip");
  FUZZ_CHECK(a.tensors.size() == b.tensors.size(), "tensor count changed in a round trip");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    FUZZ_CHECK(a.tensors[i].name == b.tensors[i].name && a.tensors[i].shape == b.tensors[i].shape,
               "tensor ", i, " changed in a round trip");
    FUZZ_CHECK(SameBits(a.tensors[i].data, b.tensors[i].data), "tensor ", a.tensors[i].name,
               " values changed in a round trip");
  }
}

void CheckRead(const std::string& path) {
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(path);
  absl::StatusOr<std::string> fingerprint = ReadCheckpointFingerprint(path);
  FUZZ_CHECK(fingerprint.ok() || CodeIn(fingerprint.status(), {absl::StatusCode::kInvalidArgument,
                                                               absl::StatusCode::kDataLoss}),
             fingerprint.status());
  if (!read.ok()) {
    FUZZ_CHECK(CodeIn(read.status(),
                      {absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
                       absl::StatusCode::kDataLoss}),
               read.status());
    FUZZ_CHECK(absl::StrContains(read.status().message(), path), "the error does not name ",
               path, ": ", read.status());
    return;
  }
  const CheckpointData& data = *read;
  std::set<std::string> names;
  for (const CheckpointTensor& t : data.tensors) {
    FUZZ_CHECK(names.insert(t.name).second, "tensor ", t.name, " read twice");
    FUZZ_CHECK(ShapeHolds(t.shape, t.data.size()), "tensor ", t.name, " has shape [",
               absl::StrJoin(t.shape, ", "), "] but ", t.data.size(), " values");
  }
  if (data.spec_fingerprint.size() <= 4096) {  // ReadCheckpointFingerprint's bound
    FUZZ_CHECK(fingerprint.ok() && *fingerprint == data.spec_fingerprint,
               "ReadCheckpointFingerprint disagrees with ReadCheckpoint: ", fingerprint.status());
  }

  const std::string copy = fuzz::ScratchDir() + "/round-trip.ckpt";
  const absl::Status written = WriteCheckpoint(copy, data);
  FUZZ_CHECK(written.ok(), "a checkpoint read cannot be written back: ", written);
  absl::StatusOr<CheckpointData> again = ReadCheckpoint(copy);
  FUZZ_CHECK(again.ok(), "a checkpoint written back cannot be read: ", again.status());
  CheckSame(data, *again);

  // What a rank does with it: resume (the model of the seed corpus: layers 4-3-2, buffers) ...
  Mlp model({4, 3, 2}, /*seed=*/1, MlpOptions{/*with_buffers=*/true});
  SgdOptions sgd;
  sgd.momentum = 0.9;
  SgdOptimizer optimizer(model.parameters(), sgd);
  const absl::Status restored = RestoreTrainingState(data, "", &model, &optimizer);
  FUZZ_CHECK(restored.ok() || restored.code() == absl::StatusCode::kFailedPrecondition, restored);
  // ... or start from it (init_from).
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  if (IsShardedManifest(data)) {
    // A manifest: init_from consolidates the shards it names (files of its own directory).
    FUZZ_CHECK(weights.ok() || CodeIn(weights.status(), {absl::StatusCode::kNotFound,
                                                         absl::StatusCode::kInvalidArgument,
                                                         absl::StatusCode::kFailedPrecondition,
                                                         absl::StatusCode::kDataLoss}),
               weights.status());
    if (!weights.ok()) return;
  }
  FUZZ_CHECK(weights.ok(), "ReadInitialWeights refuses a checkpoint ReadCheckpoint reads: ",
             weights.status());
  Mlp fresh({4, 3, 2}, /*seed=*/2, MlpOptions{/*with_buffers=*/true});
  const absl::Status loaded = LoadInitialWeights(*weights, &fresh);
  FUZZ_CHECK(loaded.ok() || loaded.code() == absl::StatusCode::kFailedPrecondition, loaded);
  // ... with its momentum (model.init_optimizer_state).
  const absl::Status momentum = InitialMomentum(*weights, &fresh).status();
  FUZZ_CHECK(momentum.ok() || momentum.code() == absl::StatusCode::kFailedPrecondition, momentum);
}

}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  ringleader::CheckRead(ringleader::fuzz::WriteScratchFile("input.ckpt", bytes));
  if (bytes.size() >= 4) {
    const size_t body = bytes.size() - 4;
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), body));
    for (int i = 0; i < 4; ++i) bytes[body + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    ringleader::CheckRead(ringleader::fuzz::WriteScratchFile("input.ckpt", bytes));
  }
  return 0;
}
