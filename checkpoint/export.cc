#include "checkpoint/export.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"

namespace ringleader {

absl::Status ExportSafetensors(const CheckpointData& checkpoint, const std::string& path) {
  std::vector<CheckpointTensor> model_tensors;
  for (const CheckpointTensor& t : checkpoint.tensors) {
    if (!IsMomentumBufferName(t.name)) model_tensors.push_back(t);
  }
  if (model_tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "export to ", path, ": the checkpoint holds no model parameter or buffer to export"));
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"ringleader_step", absl::StrCat(checkpoint.step)},
      {"spec_fingerprint", checkpoint.spec_fingerprint},
  };
  return WriteSafetensors(path, model_tensors, metadata);
}

}  // namespace ringleader
