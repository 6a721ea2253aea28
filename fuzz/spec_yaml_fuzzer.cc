// Fuzz target: the job spec YAML parser (client/spec_yaml.h) and what `ringleader submit` does
// with its result (defaults, validation, errors located in the file); and `--set PATH=VALUE`
// (SetJobSpecField).
//
// Input: YAML text. For --set, its first line is the field path and the rest the value.
// Holds: errors are INVALID_ARGUMENT and start with the source name; every field line is >= 1;
// a parsed spec can be sent (it survives the protobuf wire format, which refuses strings that
// are not UTF-8) and, after defaults, validates or fails with INVALID_ARGUMENT.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "client/spec_yaml.h"
#include "common/job_spec.h"
#include "fuzz/fuzz_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace ringleader {
namespace {

constexpr char kSource[] = "spec.yaml";

// What `ringleader submit` does with a spec: the coordinator must be able to parse what is sent.
void CheckSendable(const v1::JobSpec& spec, const char* what) {
  v1::JobSpec received;
  FUZZ_CHECK(received.ParseFromString(spec.SerializeAsString()) &&
                 google::protobuf::util::MessageDifferencer::Equals(received, spec),
             what, " gives a spec the coordinator cannot parse: ", spec.ShortDebugString());
}

void CheckParse(const std::string& text) {
  absl::StatusOr<JobSpecYaml> parsed = ParseJobSpecYamlWithLines(text, kSource);
  absl::StatusOr<v1::JobSpec> plain = ParseJobSpecYaml(text, kSource);
  FUZZ_CHECK(parsed.ok() == plain.ok(), "ParseJobSpecYaml and ParseJobSpecYamlWithLines disagree");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument, parsed.status());
    FUZZ_CHECK(absl::StartsWith(parsed.status().message(), kSource), "unlocated error ",
               parsed.status());
    return;
  }
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*plain, parsed->spec),
             "the two parsers give different specs");
  CheckSendable(parsed->spec, "the file");
  for (const auto& [path, line] : parsed->field_lines) {
    FUZZ_CHECK(line >= 1, "field ", path, " on line ", line);
  }
  v1::JobSpec spec = parsed->spec;
  ApplyJobSpecDefaults(&spec);
  const absl::Status valid = ValidateJobSpec(spec);
  FUZZ_CHECK(valid.ok() || valid.code() == absl::StatusCode::kInvalidArgument, valid);
  const absl::Status located = LocateSpecError(valid, *parsed, kSource);
  FUZZ_CHECK(located.code() == valid.code(), "LocateSpecError changed the code: ", located);
}

void CheckSet(const std::string& text) {
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return;
  v1::JobSpec spec;
  const absl::Status status =
      SetJobSpecField(text.substr(0, newline), text.substr(newline + 1), "--set", &spec);
  if (status.ok()) {
    CheckSendable(spec, "--set");
    return;
  }
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status);
  FUZZ_CHECK(absl::StartsWith(status.message(), "--set: "), "unlocated error ", status);
}

}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ringleader::CheckParse(text);
  ringleader::CheckSet(text);
  return 0;
}
