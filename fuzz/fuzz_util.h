// Helpers shared by the fuzz targets (docs/testing.md, "Fuzzing").
//
// A fuzz target is `LLVMFuzzerTestOneInput(data, size)`: it must return 0 for every input and
// never crash, hang or trip a sanitizer. What it must hold beyond that it checks with
// FUZZ_CHECK, which aborts (libFuzzer then saves the input as a crash) with the broken promise.
#ifndef RINGLEADER_FUZZ_FUZZ_UTIL_H_
#define RINGLEADER_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"

// Aborts naming the condition and what was seen (the arguments after it, anything with an
// operator<<, statuses included; at least one) when `cond` is false.
#define FUZZ_CHECK(cond, ...)                                            \
  do {                                                                   \
    if (!(cond)) {                                                       \
      ::ringleader::fuzz::Fail(__FILE__, __LINE__, #cond,                \
                               ::ringleader::fuzz::Concat(__VA_ARGS__)); \
    }                                                                    \
  } while (0)

namespace ringleader::fuzz {

template <typename... Args>
std::string Concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

[[noreturn]] void Fail(const char* file, int line, const char* condition, const std::string& what);

// Whether `status` has one of `codes` (the codes a function documents for its errors).
bool CodeIn(const absl::Status& status, std::initializer_list<absl::StatusCode> codes);

// Whether product(shape) == count exactly (no wrap-around): what a reader returned holds up.
bool ShapeHolds(const std::vector<uint64_t>& shape, uint64_t count);

// Whether two float vectors are identical bit for bit.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

// A directory of this process's own (under $TEST_TMPDIR, else $TMPDIR, else /tmp), created on
// first use and removed with its files at exit.
const std::string& ScratchDir();

// Writes `bytes` to ScratchDir()/`name` (replacing it) and returns the path. Plain write, no
// fsync: the readers under test see exactly these bytes.
std::string WriteScratchFile(const std::string& name, const std::string& bytes);

// Reads fixed-size pieces off the front of the fuzz input; past its end they read as zero.
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  // Little-endian. (One read per statement: the order of operands' evaluation is unspecified.)
  uint16_t U16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | (Byte() << 8));
  }
  uint32_t U32() {
    const uint32_t low = U16();
    return low | (static_cast<uint32_t>(U16()) << 16);
  }
  // Up to `n` bytes (fewer at the end).
  std::string Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace ringleader::fuzz

#endif  // RINGLEADER_FUZZ_FUZZ_UTIL_H_
