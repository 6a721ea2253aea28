// Reader for the IDX format of MNIST / Fashion-MNIST (gzip-compressed or plain; zlib reads both).
//
// IDX: a big-endian uint32 magic 0x000008TD (T = 0x08 for unsigned bytes, D = number of
// dimensions), D big-endian uint32 sizes, then the data, row-major.
//   images: magic 0x00000803, sizes N × rows × cols
//   labels: magic 0x00000801, size N
#ifndef RINGLEADER_WORKER_DATA_IDX_READER_H_
#define RINGLEADER_WORKER_DATA_IDX_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringleader {

struct IdxImages {
  size_t count = 0;
  size_t rows = 0;
  size_t cols = 0;
  std::vector<uint8_t> pixels;  // count × rows × cols
};

// Reads the first min(N, max_items) images (max_items 0 = all).
// Errors (each names the file): NOT_FOUND if it does not exist (with a hint to install the
// data set package or set data.path); PERMISSION_DENIED / UNAVAILABLE if it cannot be opened;
// INVALID_ARGUMENT for a bad magic number or implausible sizes (not an IDX image file);
// DATA_LOSS if the file is truncated or the gzip stream is corrupt.
absl::StatusOr<IdxImages> ReadIdxImages(const std::string& path, size_t max_items = 0);

// Reads the first min(N, max_items) labels (max_items 0 = all). Errors as ReadIdxImages.
absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path, size_t max_items = 0);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DATA_IDX_READER_H_
