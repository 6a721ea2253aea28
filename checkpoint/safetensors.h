// The safetensors format (https://github.com/huggingface/safetensors), the weights format of
// PyTorch / Hugging Face users: ringleader writes its weights in it and reads initial weights
// from it.
//
// File layout (all integers little-endian):
//   u64 N                        length of the header in bytes
//   N bytes                      JSON header, UTF-8, starting with '{'; the writer pads it with
//                                spaces so that N is a multiple of 8 (the data stays aligned)
//   data                         the tensors' raw little-endian elements, back to back
// Header:
//   {"__metadata__": {"<key>": "<value>", ...},                         optional; strings only
//    "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...],
//                      "data_offsets": [begin, end]}, ...}
// data_offsets are byte offsets into the data section, begin inclusive, end exclusive; the
// tensors tile the data section exactly (no gaps, no overlaps, nothing after the last one), and
// end - begin = product(shape) × dtype size (shape [] is a scalar, one element). Elements are
// in row-major (C) order, as torch's tensor.contiguous() holds them.
//
// Thread-safety: free functions without shared state; concurrent writers of the same path must
// be serialised by the caller.
#ifndef RINGLEADER_CHECKPOINT_SAFETENSORS_H_
#define RINGLEADER_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"

namespace ringleader {

// Safetensors' own limit on the header length (MAX_HEADER_SIZE): a larger one is not a
// safetensors file.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

// Writes `tensors` as F32, in the order given, with `metadata` as "__metadata__" (left out when
// empty), atomically (file_io.h: <path>.tmp, fsync, rename, fsync of the directory; missing
// parent directories are created).
// Errors (naming the path): INVALID_ARGUMENT for an empty path, a duplicate tensor name, the
// reserved name "__metadata__", a tensor whose data size is not the product of its shape, or a
// name, key or value that is not valid UTF-8; errno-derived codes for I/O failures. On error
// nothing is written and the previous file at `path`, if any, is untouched.
absl::Status WriteSafetensors(const std::string& path, const std::vector<CheckpointTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// A safetensors file as read: the tensors in the order of their data in the file, widened to
// float, and the "__metadata__" strings.
struct SafetensorsFile {
  std::vector<CheckpointTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads and validates a safetensors file. Supported dtypes: F32 (bit-exact), BF16 and F16
// (widened to float exactly: every value of either converts without rounding; infinities and
// NaNs are kept).
// Errors, each naming the path and what is wrong:
//   NOT_FOUND          the file does not exist;
//   DATA_LOSS          the file is truncated: shorter than the 8-byte header length, a header
//                      that starts like one ('{') but is cut off, or tensor data that ends
//                      before the header's last data_offsets;
//   INVALID_ARGUMENT   the file is not (valid) safetensors: a header length of 0 or above
//                      kSafetensorsMaxHeaderSize, or pointing past the end of a file whose
//                      header does not start with '{'; a header that is not a JSON object;
//                      duplicate names; "__metadata__" not a string→string object; an entry
//                      without dtype, shape or data_offsets, or with ill-typed ones; a dtype
//                      other than F32, BF16 and F16 (naming the tensor and the dtype); a size
//                      that is not product(shape) × dtype size; offsets that overlap, leave a
//                      gap, or leave bytes after the last tensor;
//   errno-derived codes for other I/O failures.
absl::StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path);

// ReadSafetensorsFile's tensors, without the metadata. Errors: ReadSafetensorsFile's.
absl::StatusOr<std::vector<CheckpointTensor>> ReadSafetensors(const std::string& path);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_SAFETENSORS_H_
