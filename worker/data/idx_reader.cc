#include "worker/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Far above any real IDX file; stops a corrupt header from asking for terabytes.
constexpr uint64_t kMaxElements = uint64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

absl::StatusOr<GzFile> Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(
          path, ": no such file: run the set-up script (package dataset-fashion-mnist) or set "
                "data.path"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot stat"));
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno != 0 ? errno : EIO;
    return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot open"));
  }
  // Larger buffer than zlib's 8 KiB default: fewer read() calls on a 26 MB file.
  gzbuffer(f, 1 << 17);
  return GzFile(f);
}

// Reads exactly `n` bytes; `what` says which part of the file for the error message, and
// `offset` / `total` which bytes of that part these are (0 / n: all of it).
absl::Status ReadExactly(gzFile f, const std::string& path, void* out, size_t n,
                         const char* what, size_t offset = 0, size_t total = 0) {
  if (total == 0) total = n;
  auto* dst = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned count; read in chunks well below its limit.
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, dst + done, chunk);
    if (got < 0) {
      int zerr = 0;
      const char* msg = gzerror(f, &zerr);
      return absl::DataLossError(
          absl::StrCat(path, ": corrupt compressed data while reading ", what, ": ", msg));
    }
    if (got == 0) {
      int zerr = 0;
      const char* msg = gzerror(f, &zerr);
      return absl::DataLossError(absl::StrCat(path, ": truncated: expected ", total, " bytes of ",
                                              what, ", got ", offset + done,
                                              zerr != Z_OK ? absl::StrCat(" (", msg, ")") : ""));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

// Reads exactly `n` bytes into `out`, growing it as they arrive (1 MiB, then doubling), so that
// a header claiming more data than the file holds fails as truncated without first allocating
// all it claims (up to kMaxElements bytes for a file of a few bytes).
absl::Status ReadInto(gzFile f, const std::string& path, size_t n, std::vector<uint8_t>* out,
                      const char* what) {
  constexpr size_t kFirstChunk = size_t{1} << 20;
  out->clear();
  while (out->size() < n) {
    const size_t done = out->size();
    const size_t next = std::min(n, std::max(kFirstChunk, 2 * done));
    out->reserve(next);  // exactly: a plain resize may round the capacity up to twice the size
    out->resize(next);
    RETURN_IF_ERROR(ReadExactly(f, path, out->data() + done, out->size() - done, what, done, n));
  }
  return absl::OkStatus();
}

uint32_t BigEndian32(const unsigned char b[4]) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// Reads the magic and the `dims` sizes; INVALID_ARGUMENT if the magic is not `expected_magic`.
absl::StatusOr<std::vector<uint32_t>> ReadHeader(gzFile f, const std::string& path,
                                                 uint32_t expected_magic, const char* kind) {
  unsigned char word[4];
  RETURN_IF_ERROR(ReadExactly(f, path, word, 4, "the magic number"));
  const uint32_t magic = BigEndian32(word);
  if (magic != expected_magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: bad magic number 0x%08x, expected 0x%08x (IDX %s); is data.path pointing at the "
        "right files?",
        path, magic, expected_magic, kind));
  }
  const uint32_t dims = expected_magic & 0xff;
  std::vector<uint32_t> sizes(dims);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    RETURN_IF_ERROR(ReadExactly(f, path, word, 4, "the header"));
    sizes[d] = BigEndian32(word);
    elements *= sizes[d];
    if (elements > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": implausible IDX sizes in the header (more than ", kMaxElements,
                       " elements)"));
    }
  }
  return sizes;
}

}  // namespace

absl::StatusOr<IdxImages> ReadIdxImages(const std::string& path, size_t max_items) {
  ASSIGN_OR_RETURN(GzFile f, Open(path));
  ASSIGN_OR_RETURN(std::vector<uint32_t> sizes,
                   ReadHeader(f.get(), path, kImagesMagic, "ubyte images, 3 dimensions"));
  IdxImages images;
  images.count = sizes[0];
  if (max_items != 0 && max_items < images.count) images.count = max_items;
  images.rows = sizes[1];
  images.cols = sizes[2];
  if (images.rows == 0 || images.cols == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": image size ", images.rows, "x",
                                                   images.cols, " in the header is empty"));
  }
  RETURN_IF_ERROR(ReadInto(f.get(), path, images.count * images.rows * images.cols,
                           &images.pixels, "pixel data"));
  return images;
}

absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path, size_t max_items) {
  ASSIGN_OR_RETURN(GzFile f, Open(path));
  ASSIGN_OR_RETURN(std::vector<uint32_t> sizes,
                   ReadHeader(f.get(), path, kLabelsMagic, "ubyte labels, 1 dimension"));
  size_t count = sizes[0];
  if (max_items != 0 && max_items < count) count = max_items;
  std::vector<uint8_t> labels;
  RETURN_IF_ERROR(ReadInto(f.get(), path, count, &labels, "label data"));
  return labels;
}

}  // namespace ringleader
