// Fuzz target: the safetensors reader (checkpoint/safetensors.h), directly and as
// init_from reads it (ReadInitialWeights, LoadInitialWeights).
//
// Input: the bytes of a .safetensors file.
// Holds: only the documented error codes; a file read is consistent (unique names, none of them
// "__metadata__", every tensor's shape product, without overflow, is its value count) and
// survives a write (as F32) and a read back unchanged, metadata included.
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"
#include "worker/checkpoint/initial_weights.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

using fuzz::CodeIn;
using fuzz::SameBits;
using fuzz::ShapeHolds;


}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringleader;  // NOLINT
  const std::string path = fuzz::WriteScratchFile(
      "input.safetensors", std::string(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<SafetensorsFile> read = ReadSafetensorsFile(path);
  if (!read.ok()) {
    FUZZ_CHECK(CodeIn(read.status(),
                      {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss}),
               read.status());
    FUZZ_CHECK(absl::StrContains(read.status().message(), path), "the error does not name ",
               path, ": ", read.status());
    return 0;
  }
  std::set<std::string> names;
  for (const CheckpointTensor& t : read->tensors) {
    FUZZ_CHECK(t.name != "__metadata__", "a tensor called __metadata__");
    FUZZ_CHECK(names.insert(t.name).second, "tensor ", t.name, " read twice");
    FUZZ_CHECK(ShapeHolds(t.shape, t.data.size()), "tensor ", t.name, " has shape [",
               absl::StrJoin(t.shape, ", "), "] but ", t.data.size(), " values");
  }

  const std::string copy = fuzz::ScratchDir() + "/round-trip.safetensors";
  const absl::Status written = WriteSafetensors(copy, read->tensors, read->metadata);
  FUZZ_CHECK(written.ok(), "a file read cannot be written back: ", written);
  absl::StatusOr<SafetensorsFile> again = ReadSafetensorsFile(copy);
  FUZZ_CHECK(again.ok(), "a file written back cannot be read: ", again.status());
  FUZZ_CHECK(again->metadata == read->metadata, "metadata changed in a round trip");
  FUZZ_CHECK(again->tensors.size() == read->tensors.size(), "tensor count changed");
  for (size_t i = 0; i < read->tensors.size(); ++i) {
    const CheckpointTensor& a = read->tensors[i];
    const CheckpointTensor& b = again->tensors[i];
    FUZZ_CHECK(a.name == b.name && a.shape == b.shape, "tensor ", i, " changed in a round trip");
    FUZZ_CHECK(SameBits(a.data, b.data), "tensor ", a.name, " values changed in a round trip");
  }

  // init_from: the content decides the format; the seed corpus's model is 4-3-2 with buffers.
  absl::StatusOr<CheckpointData> weights = ReadInitialWeights(path);
  FUZZ_CHECK(weights.ok(), "ReadInitialWeights refuses a file ReadSafetensorsFile reads: ",
             weights.status());
  Mlp model({4, 3, 2}, /*seed=*/1, MlpOptions{/*with_buffers=*/true});
  const absl::Status loaded = LoadInitialWeights(*weights, &model);
  FUZZ_CHECK(loaded.ok() || loaded.code() == absl::StatusCode::kFailedPrecondition, loaded);
  return 0;
}
