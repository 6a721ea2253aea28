// Reading a job spec from YAML, and setting single spec fields from the command line.
//
// YAML keys are the proto field names of `ringleader.v1.JobSpec` (the mapping is driven by the
// proto descriptor, so a new proto field is accepted without code changes):
//
//   name: fmnist-ddp
//   world_size: 2
//   backend: gloo
//   model: {kind: mlp, layers: [784, 256, 128, 10]}
//   optimizer: {learning_rate: 0.05, momentum: 0.9}
//   sync: {bucket_cap_mb: 25, overlap: true}
//   epochs: 3
//
// A key with no value (`seed:` or `seed: ~`) leaves the field unset, so its default applies.
// Errors are INVALID_ARGUMENT, located and naming the field path and the fix:
//   spec.yaml:7: unknown field 'optimiser' (did you mean 'optimizer'?)
//   spec.yaml:3: world_size: expected an unsigned integer, got 'two'
//   spec.yaml:4:9: malformed YAML: ...            (yaml-cpp's line and column)
// Thread-safe (no shared state).
#ifndef RINGLEADER_CLIENT_SPEC_YAML_H_
#define RINGLEADER_CLIENT_SPEC_YAML_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// Parses `text` (named `source_name` in errors, e.g. "spec.yaml"). Applies no defaults and
// does not validate ranges: see common/job_spec.h for both. An empty document gives an empty
// spec. Errors: INVALID_ARGUMENT (malformed YAML, unknown field, wrong type, negative or
// out-of-range integer, duplicate key).
absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& text,
                                             const std::string& source_name);

// A parsed spec plus the 1-based line of every field path given in the file ("world_size",
// "optimizer.learning_rate", "model.layers"), so later errors about a field can point at it.
struct JobSpecYaml {
  v1::JobSpec spec;
  std::map<std::string, int> field_lines;
};
absl::StatusOr<JobSpecYaml> ParseJobSpecYamlWithLines(const std::string& text,
                                                      const std::string& source_name);

// Sets the field at `path` (e.g. "optimizer.momentum", "model.layers") from `value`, written
// as in YAML ("0.9", "[784, 64, 10]", "true"). An empty value clears the field (its default
// applies). Errors: INVALID_ARGUMENT as for ParseJobSpecYaml, prefixed with `source_name`
// (e.g. "--set").
absl::Status SetJobSpecField(const std::string& path, const std::string& value,
                             const std::string& source_name, v1::JobSpec* spec);

// Prefixes a spec validation error ("optimizer.learning_rate: must be > 0 ...") with
// "<source>:<line>: " when the field it names was given in the file; other statuses unchanged.
absl::Status LocateSpecError(const absl::Status& status, const JobSpecYaml& parsed,
                             const std::string& source_name);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_SPEC_YAML_H_
