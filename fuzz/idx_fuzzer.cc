// Fuzz target: the IDX reader of the Fashion-MNIST files (worker/data/idx_reader.h), plain or
// gzip-compressed.
//
// Input: the bytes of an IDX file. It is read as images and as labels (one of the two magics
// fails), each whole and cut to its first few items (max_items 1 + size % 5).
// Holds: only the documented error codes (INVALID_ARGUMENT, DATA_LOSS), each naming the file;
// what is read matches its header: rows and columns >= 1, pixels = count × rows × cols, at most
// max_items items.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/idx_reader.h"

namespace ringleader {
namespace {

using fuzz::CodeIn;

void CheckError(const absl::Status& status, const std::string& path) {
  FUZZ_CHECK(CodeIn(status, {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss}),
             status);
  FUZZ_CHECK(absl::StrContains(status.message(), path), "the error does not name ", path, ": ",
             status);
}

void ReadAll(const std::string& path, size_t max_items) {
  absl::StatusOr<IdxImages> images = ReadIdxImages(path, max_items);
  if (images.ok()) {
    FUZZ_CHECK(images->rows >= 1 && images->cols >= 1, "empty images ", images->rows, "x",
               images->cols);
    FUZZ_CHECK(images->pixels.size() == images->count * images->rows * images->cols,
               images->pixels.size(), " pixels for ", images->count, " images of ", images->rows,
               "x", images->cols);
    FUZZ_CHECK(max_items == 0 || images->count <= max_items, images->count, " images read, ",
               max_items, " asked for");
  } else {
    CheckError(images.status(), path);
  }
  absl::StatusOr<std::vector<uint8_t>> labels = ReadIdxLabels(path, max_items);
  if (labels.ok()) {
    FUZZ_CHECK(max_items == 0 || labels->size() <= max_items, labels->size(), " labels read, ",
               max_items, " asked for");
  } else {
    CheckError(labels.status(), path);
  }
}

}  // namespace
}  // namespace ringleader

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ringleader::fuzz::WriteScratchFile(
      "input-idx-ubyte", std::string(reinterpret_cast<const char*>(data), size));
  ringleader::ReadAll(path, 0);
  ringleader::ReadAll(path, 1 + size % 5);
  return 0;
}
