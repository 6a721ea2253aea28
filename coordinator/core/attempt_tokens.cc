#include "coordinator/core/attempt_tokens.h"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringleader {

AttemptTokens::AttemptTokens(std::string secret) : secret_(std::move(secret)) {}

std::string AttemptTokens::For(absl::string_view job, uint64_t generation) const {
  const std::string message = absl::StrCat(job, "/", generation);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

absl::Status AttemptTokens::Check(absl::string_view job, uint64_t generation,
                                  absl::string_view presented, absl::string_view method) const {
  if (presented.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        method, ": no attempt token: only the ranks of attempt ", generation, " of ", job,
        " (which get it in their assignment) may call this"));
  }
  const std::string expected = For(job, generation);
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i]) ^
            static_cast<unsigned char>(i < presented.size() ? presented[i] : 0);
  }
  if (diff != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        method, ": the attempt token is not that of attempt ", generation, " of ", job,
        ": a rank may only use its own attempt"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> AttemptTokens::LoadOrCreateSecret(const std::string& path) {
  std::string secret(32, '\0');
  if (path.empty() || access(path.c_str(), F_OK) != 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()),
                   static_cast<int>(secret.size())) != 1) {
      return absl::InternalError("cannot draw random bytes for the attempt secret");
    }
    if (path.empty()) return secret;
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size()) ||
        fsync(fd) != 0) {
      if (fd >= 0) close(fd);
      return absl::InternalError(absl::StrCat("cannot write the attempt secret ", path));
    }
    close(fd);
    return secret;
  }
  std::ifstream file(path, std::ios::binary);
  std::string read((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file.good() && !file.eof()) {
    return absl::InternalError(absl::StrCat("cannot read the attempt secret ", path));
  }
  if (read.size() < 16) {
    return absl::InternalError(absl::StrCat("the attempt secret ", path, " holds ", read.size(),
                                            " bytes (at least 16): remove it to make a new one "
                                            "(running attempts then fail their next call)"));
  }
  return read;
}

}  // namespace ringleader
