#include "client/command_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "client/format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ringleader {
namespace {

// Return 0 or the errno of the first failure.
int WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Writes `bytes` to the open file `fd`, flushes it to disk and closes it.
int WriteAndClose(int fd, const std::string& bytes) {
  int error = WriteAll(fd, bytes);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

}  // namespace

int WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  int error = WriteAndClose(fd, bytes);
  if (error == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) ::unlink(temporary.c_str());  // best effort; the file at `path` is untouched
  return error;
}

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

int PrintJson(const google::protobuf::Message& message, const CommandEnvironment& env,
              bool one_line) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !one_line;
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

int PrintJsonFields(const std::vector<std::pair<std::string, std::string>>& fields,
                    const CommandEnvironment& env) {
  google::protobuf::Struct message;
  for (const auto& [key, value] : fields) {
    (*message.mutable_fields())[key].set_string_value(value);
  }
  return PrintJson(message, env, /*one_line=*/true);
}

}  // namespace ringleader
