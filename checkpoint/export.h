// Exports a ringleader checkpoint's model weights as a safetensors file (safetensors.h) that
// PyTorch loads into the equivalent nn.Module:
//
//   class Mlp(nn.Module):  # model.layers {784, 256, 128, 10}, ReLU between the layers
//       def __init__(self):
//           super().__init__()
//           self.fc1 = nn.Linear(784, 256)
//           self.fc2 = nn.Linear(256, 128)
//           self.fc3 = nn.Linear(128, 10)
//   Mlp().load_state_dict(safetensors.torch.load_file("weights.safetensors"))
//
// Names and shapes map one to one, without transposition:
//   fcK.weight  [out, in]  = nn.Linear(in, out).weight: the Mlp stores each weight row-major as
//                            [fan_out, fan_in] (mlp.h; forward computes x · Wᵀ + b), exactly
//                            torch's layout, so the bytes are copied as they are;
//   fcK.bias    [out]      = nn.Linear.bias;
//   buffers     [n]        by their names (fc1.input_mean, fc1.input_mask, only in a model
//                          built with buffers: the torch module must register them on fc1, or
//                          load with strict=False); a bool buffer is written as F32 0/1
//                          (load_state_dict's copy_ converts it back).
// Every tensor is F32. Optimizer momentum buffers ("<parameter>.momentum_buffer") are left out:
// they are optimizer state, not model state. Metadata:
//   {"format": "pt", "ringleader_step": "<step>", "spec_fingerprint": "<fingerprint>"}.
//
// Thread-safety: a free function; concurrent writers of one path must be serialised.
#ifndef RINGLEADER_CHECKPOINT_EXPORT_H_
#define RINGLEADER_CHECKPOINT_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "checkpoint/checkpoint.h"

namespace ringleader {

// Writes the parameters and buffers of `checkpoint` to `path` (atomically; see
// WriteSafetensors), in the checkpoint's order.
// Errors (naming the path): INVALID_ARGUMENT if the checkpoint holds no model tensor, and
// WriteSafetensors' errors (INVALID_ARGUMENT for inconsistent tensors; errno-derived codes for
// I/O failures).
absl::Status ExportSafetensors(const CheckpointData& checkpoint, const std::string& path);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_EXPORT_H_
