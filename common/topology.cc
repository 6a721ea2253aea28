#include "common/topology.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringleader {

namespace {

constexpr size_t kMaxPartLength = 128;

bool Allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status CheckPart(absl::string_view text, absl::string_view part, absl::string_view what) {
  if (part.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "': the ", what, " is empty: give RACK/HOST or HOST, e.g. ", "rack1/node7"));
  }
  if (part.size() > kMaxPartLength) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': the ", what, " is longer than ",
                                                   kMaxPartLength, " characters"));
  }
  for (char c : part) {
    if (!Allowed(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': the ", what, " holds '", absl::string_view(&c, 1),
                       "': use only letters, digits, '.', '_' and '-' (RACK/HOST, e.g. "
                       "rack1/node7)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "empty: give RACK/HOST or HOST, e.g. "
        "rack1/node7 (by default the host name)");
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  if (parts.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' has ", parts.size(),
                                                   " parts: give RACK/HOST or HOST, e.g. "
                                                   "rack1/node7"));
  }
  Topology topology;
  if (parts.size() == 2) {
    if (absl::Status status = CheckPart(text, parts[0], "rack"); !status.ok()) return status;
    topology.rack = std::string(parts[0]);
  }
  if (absl::Status status = CheckPart(text, parts.back(), "host"); !status.ok()) return status;
  topology.host = std::string(parts.back());
  return topology;
}

std::string FormatTopology(const Topology& topology) {
  return topology.rack.empty() ? topology.host : absl::StrCat(topology.rack, "/", topology.host);
}

}  // namespace ringleader
