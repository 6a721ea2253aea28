#include "worker/checkpoint/initial_weights.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/file_io.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_checkpoint.h"
#include "common/status_macros.h"
#include "worker/checkpoint/training_state.h"

namespace ringleader {
namespace {

enum class Format { kCheckpoint, kSafetensors, kUnknown };

constexpr size_t kSafetensorsHeaderStart = 8;  // after the u64 header length

Format DetectFormat(const std::string& path, const std::string& head) {
  const std::string magic = kCheckpointMagic;
  if (absl::StartsWith(head, magic)) return Format::kCheckpoint;
  if (head.size() > kSafetensorsHeaderStart && head[kSafetensorsHeaderStart] == '{') {
    return Format::kSafetensors;
  }
  // Neither: let the reader the file claims to be for name the damage.
  if (absl::EndsWith(path, ".safetensors")) return Format::kSafetensors;
  if (absl::StartsWith(magic, head)) return Format::kCheckpoint;  // cut off inside the magic
  return Format::kUnknown;
}

absl::StatusOr<CheckpointData> ReadSafetensorsAsCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(SafetensorsFile file, ReadSafetensorsFile(path));
  CheckpointData data;  // step 0, no fingerprint: a new training starts from these weights
  data.attributes = std::move(file.metadata);
  data.tensors = std::move(file.tensors);
  return data;
}

std::string Prefix(const CheckpointData& weights) {
  const auto it = weights.attributes.find(kInitFromPathAttribute);
  return it == weights.attributes.end() ? "init_from: "
                                        : absl::StrCat("init_from ", it->second, ": ");
}

std::string ShapeString(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A tensor the model expects: its parameters in registration order, then its buffers.
struct Expected {
  std::string name;
  std::vector<uint64_t> shape;
};

std::vector<Expected> ExpectedTensors(Mlp* model) {
  std::vector<Expected> expected;
  for (const ParameterInfo& p : model->parameters()) {
    expected.push_back({p.name, std::vector<uint64_t>(p.shape.begin(), p.shape.end())});
  }
  for (const BufferInfo& b : model->buffers()) expected.push_back({b.name, {b.count}});
  return expected;
}

// The tensor of `weights` for each of ExpectedTensors(model), in that order, after checking
// that they match exactly (see CheckInitialWeights).
absl::StatusOr<std::vector<const CheckpointTensor*>> Match(const CheckpointData& weights,
                                                           Mlp* model) {
  const std::string prefix = Prefix(weights);
  const std::vector<Expected> expected = ExpectedTensors(model);
  std::vector<const CheckpointTensor*> found;
  std::set<std::string> names;
  for (const Expected& e : expected) {
    names.insert(e.name);
    const CheckpointTensor* t = weights.FindTensor(e.name);
    if (t == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(prefix, e.name,
                                                        " is missing from the file (the model's "
                                                        "shape is ",
                                                        ShapeString(e.shape), ")"));
    }
    if (t->shape != e.shape) {
      return absl::FailedPreconditionError(absl::StrCat(prefix, e.name, " has shape ",
                                                        ShapeString(t->shape), " in the file but ",
                                                        ShapeString(e.shape), " in the model"));
    }
    uint64_t elements = 1;
    for (uint64_t d : e.shape) elements *= d;
    if (t->data.size() != elements) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, e.name, " has shape ",
                                                     ShapeString(t->shape), " but ", t->data.size(),
                                                     " values"));
    }
    found.push_back(t);
  }
  for (const CheckpointTensor& t : weights.tensors) {
    if (names.count(t.name) == 0 && !IsMomentumBufferName(t.name)) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, "the file has ", t.name, " (shape ", ShapeString(t.shape),
                       "), which the model does not have; was it written for other "
                       "model.layers?"));
    }
  }
  return found;
}

void CopyBuffer(const std::vector<float>& values, const BufferInfo& buffer) {
  if (buffer.type == BufferType::kFloat32) {
    std::copy(values.begin(), values.end(), static_cast<float*>(buffer.data));
    return;
  }
  bool* out = static_cast<bool*>(buffer.data);
  for (size_t k = 0; k < values.size(); ++k) out[k] = values[k] != 0.0f;
}

}  // namespace

absl::StatusOr<CheckpointData> ReadInitialWeights(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string head,
                   ReadFilePrefix("init_from", path, kSafetensorsHeaderStart + 1));
  CheckpointData data;
  switch (DetectFormat(path, head)) {
    case Format::kCheckpoint: {
      ASSIGN_OR_RETURN(data, ReadCheckpoint(path));
      if (IsShardedManifest(data)) {
        ASSIGN_OR_RETURN(data, ConsolidateShards(path, data));
      }
      data.attributes[kInitFromFormatAttribute] = kFormatCheckpoint;
      break;
    }
    case Format::kSafetensors: {
      ASSIGN_OR_RETURN(data, ReadSafetensorsAsCheckpoint(path));
      data.attributes[kInitFromFormatAttribute] = kFormatSafetensors;
      break;
    }
    case Format::kUnknown:
      return absl::InvalidArgumentError(
          absl::StrCat("init_from ", path,
                       " is neither a ringleader checkpoint (which starts with ", kCheckpointMagic,
                       ") nor a safetensors file (whose JSON header starts at byte 8 with "
                       "'{')"));
  }
  data.attributes[kInitFromPathAttribute] = path;
  return data;
}

absl::StatusOr<std::vector<std::vector<float>>> InitialMomentum(const CheckpointData& weights,
                                                                Mlp* model) {
  const std::string prefix = Prefix(weights);
  const auto format = weights.attributes.find(kInitFromFormatAttribute);
  if (format != weights.attributes.end() && format->second == kFormatSafetensors) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "is a safetensors file, which holds parameters only; model.init_optimizer_state "
                "needs a ringleader checkpoint (e.g. <checkpoint_dir>/<job>/final.ckpt) or drop "
                "init_optimizer_state"));
  }
  const std::vector<ParameterInfo>& params = model->parameters();
  std::set<std::string> expected;
  std::vector<std::vector<float>> momentum(params.size());
  bool any = false;
  for (size_t i = 0; i < params.size(); ++i) {
    expected.insert(MomentumBufferName(params[i].name));
    const CheckpointTensor* t = weights.FindTensor(MomentumBufferName(params[i].name));
    if (t == nullptr) continue;
    const std::vector<uint64_t> shape(params[i].shape.begin(), params[i].shape.end());
    if (t->shape != shape || t->data.size() != params[i].count) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, t->name, " has shape ", ShapeString(t->shape), " (", t->data.size(),
          " values) in the file but the model's ", params[i].name, " is ", ShapeString(shape)));
    }
    momentum[i] = t->data;
    any = true;
  }
  for (const CheckpointTensor& t : weights.tensors) {
    if (IsMomentumBufferName(t.name) && expected.count(t.name) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, "the file has ", t.name,
                       ", for a parameter the model does not have; was it written for other "
                       "model.layers?"));
    }
  }
  if (!any) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "holds no optimizer momentum (no <parameter>.momentum_buffer tensor; was it "
                "written by a job with optimizer.momentum 0, or before its first step?); drop "
                "model.init_optimizer_state to start the optimizer afresh"));
  }
  return momentum;
}

absl::Status CheckInitialWeights(const CheckpointData& weights, Mlp* model) {
  return Match(weights, model).status();
}

absl::Status LoadInitialWeights(const CheckpointData& weights, Mlp* model) {
  ASSIGN_OR_RETURN(const std::vector<const CheckpointTensor*> found, Match(weights, model));
  const size_t params = model->parameters().size();
  for (size_t i = 0; i < params; ++i) {
    std::copy(found[i]->data.begin(), found[i]->data.end(), model->param(i));
  }
  const std::vector<BufferInfo> buffers = model->buffers();
  for (size_t b = 0; b < buffers.size(); ++b) CopyBuffer(found[params + b]->data, buffers[b]);
  return absl::OkStatus();
}

}  // namespace ringleader
