// Fuzz target: job spec validation (common/job_spec.h), as the coordinator runs it on a
// submitted spec.
//
// Input: a serialized ringleader.v1.JobSpec (protobuf wire format); bytes that do not parse are
// skipped.
// Holds: ValidateJobSpec answers OK or INVALID_ARGUMENT, before and after defaults;
// ApplyJobSpecDefaults is idempotent; the fingerprint is 16 hex digits, the same for equal
// specs; ModelParameterNames gives two names per linear layer.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "common/job_spec.h"
#include "fuzz/fuzz_util.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

std::string Deterministic(const v1::JobSpec& spec) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    spec.SerializeToCodedStream(&coded);
  }
  return bytes;
}

void CheckValidation(const v1::JobSpec& spec) {
  const absl::Status status = ValidateJobSpec(spec);
  FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInvalidArgument, status);
  JobSpecLimits small;
  small.max_world_size = 4;
  small.max_layers = 2;
  small.max_layer_width = 1000;
  small.max_batch_size = 16;
  small.max_epochs = 2;
  const absl::Status limited = ValidateJobSpec(spec, small);
  FUZZ_CHECK(limited.ok() || limited.code() == absl::StatusCode::kInvalidArgument, limited);
}

}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringleader;  // NOLINT
  v1::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  CheckValidation(spec);

  const std::string fingerprint = JobSpecFingerprint(spec);
  FUZZ_CHECK(fingerprint.size() == 16, "fingerprint ", fingerprint);
  for (char c : fingerprint) {
    FUZZ_CHECK(absl::ascii_isxdigit(c) && !absl::ascii_isupper(c), "fingerprint ", fingerprint);
  }
  v1::JobSpec copy;
  FUZZ_CHECK(copy.ParseFromString(spec.SerializeAsString()), "a spec does not parse back");
  FUZZ_CHECK(JobSpecFingerprint(copy) == fingerprint, "equal specs, different fingerprints");

  ApplyJobSpecDefaults(&spec);
  const std::string once = Deterministic(spec);
  ApplyJobSpecDefaults(&spec);
  FUZZ_CHECK(Deterministic(spec) == once, "ApplyJobSpecDefaults is not idempotent");
  CheckValidation(spec);

  const std::vector<std::string> names = ModelParameterNames(spec.model());
  if (spec.model().kind() == "mlp" && spec.model().layers_size() >= 2) {
    FUZZ_CHECK(names.size() == 2 * static_cast<size_t>(spec.model().layers_size() - 1),
               names.size(), " parameter names for ", spec.model().layers_size(), " sizes");
  } else {
    FUZZ_CHECK(names.empty(), names.size(), " parameter names for a model that has none");
  }
  return 0;
}
