// usage: safetensors_cross_check_writer OUTPUT_PATH
// Exports the model safetensors_cross_check.py expects: layers {4, 3, 2} with buffers, every
// value set by SetPatternValues, momentum buffers in the checkpoint (which the export must
// leave out), step 42, spec fingerprint "cafef00d".
#include <iostream>
#include <memory>

#include "checkpoint/export.h"
#include "worker/checkpoint/test_model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUTPUT_PATH\n";
    return 2;
  }
  std::unique_ptr<ringleader::Mlp> model = ringleader::MakeTestModel({4, 3, 2}, 1, true);
  ringleader::SetPatternValues(model.get());
  const ringleader::CheckpointData checkpoint =
      ringleader::CaptureWithMomentum(model.get(), 42, "cafef00d");
  const absl::Status status = ringleader::ExportSafetensors(checkpoint, argv[1]);
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
