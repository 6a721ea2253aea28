// `ringleader submit`: build the spec locally (the same defaults and validation the
// coordinator applies, so mistakes surface before anything is sent), then submit.
#include <string>

#include "absl/strings/str_cat.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/spec_yaml.h"
#include "common/job_spec.h"
#include "common/status_macros.h"

namespace ringleader {

absl::StatusOr<v1::JobSpec> BuildSubmitSpec(const SubmitOptions& options,
                                            const CommandEnvironment& env) {
  JobSpecYaml parsed;
  if (!options.spec_path.empty()) {
    absl::StatusOr<std::string> text = env.read_file(options.spec_path);
    if (!text.ok()) {
      return absl::Status(
          text.status().code(),
          absl::StrCat("cannot read spec file ", options.spec_path, ": ", text.status().message()));
    }
    ASSIGN_OR_RETURN(parsed, ParseJobSpecYamlWithLines(*text, options.spec_path));
  }
  v1::JobSpec spec = parsed.spec;
  bool world_size_given = parsed.field_lines.count("world_size") > 0;
  for (const SpecOverride& change : options.overrides) {
    RETURN_IF_ERROR(SetJobSpecField(change.path, change.value, change.source, &spec));
    if (change.path == "world_size") world_size_given = !change.value.empty();
  }
  // world_size has no server-side default on purpose (0 is an error there); the CLI picks the
  // smallest data-parallel job when the user said nothing.
  if (!world_size_given) spec.set_world_size(2);
  ApplyJobSpecDefaults(&spec);
  absl::Status valid = ValidateJobSpec(spec);
  if (!valid.ok()) return LocateSpecError(valid, parsed, options.spec_path);
  return spec;
}

int RunSubmit(const SubmitOptions& options, JobClient& client, const CommandEnvironment& env) {
  absl::StatusOr<v1::JobSpec> spec = BuildSubmitSpec(options, env);
  if (!spec.ok()) {
    *env.err << "error: invalid job spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::SubmitJobResponse> response = client.Submit(*spec);
  if (!response.ok()) {
    if (response.status().code() == absl::StatusCode::kInvalidArgument) {
      *env.err << "error: the coordinator rejected the job spec: " << response.status().message()
               << "\n";
      return kExitUsage;
    }
    return ReportError(response.status(), "submit failed", env);
  }
  if (env.json) {
    if (const int printed = PrintJson(*response, env); printed != kExitOk) return printed;
  } else {
    *env.out << "submitted job " << response->job_id() << "\n"
             << "fingerprint " << response->spec_fingerprint() << "\n";
  }
  const std::string local = JobSpecFingerprint(*spec);
  if (response->spec_fingerprint() != local) {
    *env.err << "note: the coordinator's spec fingerprint differs from the local one (" << local
             << "): it completed the spec differently; 'ringleader status " << response->job_id()
             << "' shows the spec it runs\n";
  }
  if (!options.watch) return kExitOk;
  return RunWatch(response->job_id(), options.watch_options, client, env);
}

}  // namespace ringleader
