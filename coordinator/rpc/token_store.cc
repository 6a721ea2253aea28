#include "coordinator/rpc/token_store.h"

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringleader {
namespace {

// Equal-length comparison that always reads every byte.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::vector<TokenStore::Entry>> TokenStore::Parse(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("--tokens_file: cannot read ", path));
  }
  std::vector<Entry> entries;
  std::set<std::string> names;
  std::set<std::string> tokens;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat("--tokens_file: ", path, " line ", number, ": ");
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected NAME TOKEN, got ", fields.size(), " field(s)"));
    }
    if (fields[1].size() < kMinTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "the token of '", fields[0], "' is ", fields[1].size(), " characters; use at least ",
          kMinTokenBytes, " (e.g. openssl rand -hex 16)"));
    }
    if (!names.insert(fields[0]).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'", fields[0], "' appears twice"));
    }
    if (!tokens.insert(fields[1]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "the token of '", fields[0], "' is also another name's"));
    }
    entries.push_back({fields[0], fields[1]});
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens_file: ", path, " holds no token (NAME TOKEN per line)"));
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Load(const std::string& path,
                                                             bool anonymous_reads) {
  absl::StatusOr<std::vector<Entry>> entries = Parse(path);
  if (!entries.ok()) return entries.status();
  std::unique_ptr<TokenStore> store(new TokenStore(path, anonymous_reads));
  store->entries_ = std::move(*entries);
  return store;
}

absl::Status TokenStore::Reload() {
  absl::StatusOr<std::vector<Entry>> entries = Parse(path_);  // disk I/O before the lock
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  entries_ = std::move(*entries);
  return absl::OkStatus();
}

size_t TokenStore::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

absl::StatusOr<std::string> TokenStore::Check(absl::string_view authorization, Access access,
                                              absl::string_view method) const {
  const std::string how =
      "give the CLI --token_file=FILE or set RINGLEADER_TOKEN (a token of the coordinator's "
      "--tokens_file)";
  if (authorization.empty()) {
    if (access == Access::kRead && anonymous_reads_) return std::string("anonymous");
    return absl::UnauthenticatedError(
        absl::StrCat(method, " needs a bearer token: ", how));
  }
  absl::string_view token = authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ")) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": the authorization is not \"Bearer TOKEN\""));
  }
  absl::MutexLock lock(&mu_);
  const Entry* found = nullptr;
  for (const Entry& entry : entries_) {
    if (SameToken(entry.token, token)) found = &entry;  // no early exit
  }
  if (found == nullptr) {
    return absl::UnauthenticatedError(absl::StrCat(method, ": unknown token; ", how));
  }
  return found->name;
}

}  // namespace ringleader
