#include "common/coordinator_addresses.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringleader {
namespace {

constexpr char kExpectedForm[] =
    "expected host:port[,host:port...], e.g. 10.0.0.1:7070,10.0.0.2:7070";

absl::Status Refuse(absl::string_view list, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("coordinator address list '", list, "': ", why, " (", kExpectedForm, ")"));
}

// The port of "host:port" / "[v6]:port"; "" when there is none.
absl::string_view PortOf(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return "";
  absl::string_view host = address.substr(0, colon);
  if (host.empty()) return "";
  // A bare IPv6 address ("::1") has colons in the host: it needs brackets.
  if (host.front() == '[') {
    if (host.back() != ']') return "";
  } else if (absl::StrContains(host, ':')) {
    return "";
  }
  return address.substr(colon + 1);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCoordinatorAddresses(absl::string_view list) {
  std::vector<std::string> addresses;
  if (absl::StripAsciiWhitespace(list).empty()) return Refuse(list, "no address given");
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) return Refuse(list, "an empty entry");
    const absl::string_view port = PortOf(entry);
    if (port.empty()) return Refuse(list, absl::StrCat("'", entry, "' has no port"));
    if (!std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
        port.size() > 5) {
      return Refuse(list, absl::StrCat("'", entry, "' has no numeric port"));
    }
    if (std::find(addresses.begin(), addresses.end(), entry) != addresses.end()) {
      return Refuse(list, absl::StrCat("'", entry, "' is given twice"));
    }
    addresses.emplace_back(entry);
  }
  return addresses;
}

LeaderTracker::LeaderTracker(std::vector<std::string> addresses)
    : addresses_(std::move(addresses)) {
  if (addresses_.empty()) addresses_.emplace_back();  // a contract breach: calls fail, no crash
}

std::string LeaderTracker::current() const {
  absl::MutexLock lock(&mu_);
  return addresses_[current_];
}

std::vector<std::string> LeaderTracker::addresses() const {
  absl::MutexLock lock(&mu_);
  return addresses_;
}

size_t LeaderTracker::size() const {
  absl::MutexLock lock(&mu_);
  return addresses_.size();
}

std::string LeaderTracker::OnRefused(absl::string_view refused, absl::string_view leader_hint) {
  absl::MutexLock lock(&mu_);
  leader_hint = absl::StripAsciiWhitespace(leader_hint);
  if (!leader_hint.empty()) {
    auto known = std::find(addresses_.begin(), addresses_.end(), leader_hint);
    if (known == addresses_.end()) known = addresses_.emplace(addresses_.end(), leader_hint);
    current_ = static_cast<size_t>(known - addresses_.begin());
  } else if (addresses_[current_] == refused) {
    current_ = (current_ + 1) % addresses_.size();
  }
  return addresses_[current_];
}

}  // namespace ringleader
