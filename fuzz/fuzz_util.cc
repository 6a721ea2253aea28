#include "fuzz/fuzz_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ringleader::fuzz {
namespace {

// Removes the scratch directory at exit (not after a crash: then it is left for a look).
class Scratch {
 public:
  Scratch() {
    const char* base = std::getenv("TEST_TMPDIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    if (base == nullptr || *base == '\0') base = "/tmp";
    std::string pattern = std::string(base) + "/ringleader-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "fuzz: cannot create a directory under %s: %s\n", base,
                   std::strerror(errno));
      std::abort();
    }
    dir_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace

void Fail(const char* file, int line, const char* condition, const std::string& what) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s: %s\n", file, line, condition, what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool ShapeHolds(const std::vector<uint64_t>& shape, uint64_t count) {
  for (uint64_t d : shape) {
    if (d == 0) return count == 0;
  }
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (elements > std::numeric_limits<uint64_t>::max() / d) return false;
    elements *= d;
  }
  return elements == count;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool CodeIn(const absl::Status& status, std::initializer_list<absl::StatusCode> codes) {
  for (absl::StatusCode code : codes) {
    if (status.code() == code) return true;
  }
  return false;
}

const std::string& ScratchDir() {
  static const Scratch scratch;  // destroyed, and the directory removed, at exit
  return scratch.dir();
}

std::string WriteScratchFile(const std::string& name, const std::string& bytes) {
  const std::string path = ScratchDir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, "cannot create ", path, ": ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    FUZZ_CHECK(n > 0, "cannot write ", path, ": ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

}  // namespace ringleader::fuzz
