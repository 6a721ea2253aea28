#include "client/command_util.h"

#include "client/format.h"
#include "google/protobuf/util/json_util.h"

namespace ringleader {

int ReportError(const absl::Status& status, const std::string& what,
                const CommandEnvironment& env) {
  *env.err << "error: " << what << ": " << FormatStatus(status) << "\n";
  if (status.code() == absl::StatusCode::kUnavailable) {
    *env.err << "hint: is the coordinator running at " << env.coordinator_address
             << "? Point at another one with --coordinator HOST:PORT\n";
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    default:
      return kExitFailure;
  }
}

int PrintJson(const google::protobuf::Message& message, const CommandEnvironment& env) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (const auto converted = google::protobuf::util::MessageToJsonString(message, &json, options);
      !converted.ok()) {
    *env.err << "error: cannot print " << message.GetTypeName() << " as JSON: "
             << converted.ToString() << "\n";
    return kExitFailure;
  }
  *env.out << json;
  if (json.empty() || json.back() != '\n') *env.out << "\n";
  return kExitOk;
}

}  // namespace ringleader
