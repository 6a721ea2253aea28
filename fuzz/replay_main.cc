// A main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on every
// file named on the command line, or found (recursively) under a directory named there. The
// regression tests run each target on its seed corpus with it, in the normal (gcc) build.
// Fails when an argument does not exist or no file was found: an empty run proves nothing.
//
// As under libFuzzer's defaults in run_short.sh, an input may take at most kSecondsPerInput
// seconds (SIGALRM ends the test) and the process at most kMemoryLimit bytes of address space
// (an allocation beyond it throws std::bad_alloc, which ends the test), so the regression
// inputs of hangs and out-of-memory bugs fail here too.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr unsigned kSecondsPerInput = 10;
constexpr rlim_t kMemoryLimit = rlim_t{2} << 30;  // address space (not RSS, as libFuzzer counts)

std::vector<std::filesystem::path> InputsUnder(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(root)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             root, std::filesystem::directory_options::follow_directory_symlink)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
  } else if (std::filesystem::is_regular_file(root)) {
    files.push_back(root);
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 2;
  }
  const rlimit limit{kMemoryLimit, kMemoryLimit};
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    std::perror("setrlimit(RLIMIT_AS)");
    return 1;
  }
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files = InputsUnder(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "%s: no input files (missing or empty)\n", argv[i]);
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", file.c_str());
        return 1;
      }
      std::printf("running %s (%zu bytes)\n", file.c_str(), bytes.size());
      std::fflush(stdout);
      alarm(kSecondsPerInput);
      const int rc = LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            bytes.size());
      alarm(0);
      if (rc != 0) {
        std::fprintf(stderr, "%s: LLVMFuzzerTestOneInput returned %d\n", file.c_str(), rc);
        return 1;
      }
      ++ran;
    }
  }
  std::printf("%zu inputs ran without a failure\n", ran);
  return 0;
}
