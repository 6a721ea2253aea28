#include "checkpoint/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "checkpoint/file_io.h"
#include "checkpoint/little_endian.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr const char* kMagic = kCheckpointMagic;
constexpr size_t kMagicSize = sizeof(kCheckpointMagic) - 1;

constexpr char kKind[] = "checkpoint";

// ReadCheckpointFingerprint reads the magic, version, step, epoch and fingerprint length, then
// the fingerprint (a short hex string; more than kMaxFingerprintBytes is damage).
constexpr size_t kFingerprintFixedBytes = kMagicSize + 4 + 8 + 8 + 4;
constexpr size_t kMaxFingerprintBytes = 4096;
constexpr size_t kFingerprintHeadBytes = kFingerprintFixedBytes + kMaxFingerprintBytes;

// ---- encoding (explicit little-endian, independent of the host) ----

void PutU32(std::string* out, uint32_t v) { AppendLittleEndian<uint32_t>(out, v); }
void PutU64(std::string* out, uint64_t v) { AppendLittleEndian<uint64_t>(out, v); }
void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads fields from a byte range; every read is bounds-checked so a damaged file can never make
// us read past the end or allocate more than the file holds.
class Reader {
 public:
  Reader(const std::string& path, const char* data, size_t size)
      : path_(path), p_(data), end_(data + size) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  absl::Status Truncated(const char* what) const {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path_, " is corrupt: ", what, " is truncated"));
  }
  absl::Status Need(size_t n, const char* what) const {
    return remaining() < n ? Truncated(what) : absl::OkStatus();
  }
  absl::StatusOr<uint32_t> U32(const char* what) {
    RETURN_IF_ERROR(Need(4, what));
    const uint32_t v = LoadLittleEndian<uint32_t>(p_);
    p_ += 4;
    return v;
  }
  absl::StatusOr<uint64_t> U64(const char* what) {
    RETURN_IF_ERROR(Need(8, what));
    const uint64_t v = LoadLittleEndian<uint64_t>(p_);
    p_ += 8;
    return v;
  }
  absl::StatusOr<std::string> String(const char* what) {
    ASSIGN_OR_RETURN(uint32_t n, U32(what));
    RETURN_IF_ERROR(Need(n, what));
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  absl::Status Floats(size_t count, std::vector<float>* out, const char* what) {
    if (count > remaining() / 4) return Truncated(what);
    out->resize(count);
    LoadFloats32(p_, count, out->data());
    p_ += 4 * count;
    return absl::OkStatus();
  }

 private:
  const std::string& path_;
  const char* p_;
  const char* end_;
};

absl::StatusOr<std::string> Encode(const std::string& path, const CheckpointData& data) {
  std::set<std::string> names;
  size_t payload = 0;
  for (const CheckpointTensor& t : data.tensors) {
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", path, ": tensor \"", t.name,
                                                     "\" appears twice; names must be unique"));
    }
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    if (elements != t.data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", path, ": tensor \"", t.name, "\" has ", t.data.size(),
                       " values but its shape holds ", elements));
    }
    payload += t.name.size() + 16 + 8 * t.shape.size() + 4 * t.data.size();
  }
  std::string out;
  out.reserve(payload + 256 + data.spec_fingerprint.size());
  out.append(kMagic, kMagicSize);
  PutU32(&out, kCheckpointVersion);
  PutU64(&out, data.step);
  PutU64(&out, data.epoch);
  PutString(&out, data.spec_fingerprint);
  PutU32(&out, static_cast<uint32_t>(data.attributes.size()));
  for (const auto& [key, value] : data.attributes) {
    PutString(&out, key);
    PutString(&out, value);
  }
  PutU32(&out, static_cast<uint32_t>(data.tensors.size()));
  for (const CheckpointTensor& t : data.tensors) {
    PutString(&out, t.name);
    PutU32(&out, static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) PutU64(&out, d);
    PutU64(&out, t.data.size());
    AppendFloats32(&out, t.data.data(), t.data.size());
  }
  // crc32_z takes a size_t length: files over 4 GiB are covered whole (crc32's uInt is not).
  const uLong crc = crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()),
                            out.size());
  PutU32(&out, static_cast<uint32_t>(crc));
  return out;
}

// Everything of a checkpoint file after it was read whole (ReadCheckpoint's checks).
absl::StatusOr<CheckpointData> Decode(const std::string& path, const std::string& bytes) {
  const size_t magic_checked = std::min(bytes.size(), kMagicSize);
  if (std::memcmp(bytes.data(), kMagic, magic_checked) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", path, " is not a ringleader checkpoint (bad magic)"));
  }
  // magic + version + step + epoch + empty fingerprint + 0 attributes + 0 tensors + crc
  constexpr size_t kMinSize = kMagicSize + 4 + 8 + 8 + 4 + 4 + 4 + 4;
  if (bytes.size() < kMinSize) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: only ",
                                            bytes.size(), " bytes (truncated)"));
  }
  const size_t body = bytes.size() - 4;
  Reader crc_reader(path, bytes.data() + body, 4);
  ASSIGN_OR_RETURN(const uint32_t stored_crc, crc_reader.U32("checksum"));
  const uLong crc =
      crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), body);
  if (static_cast<uint32_t>(crc) != stored_crc) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is corrupt: checksum mismatch"));
  }

  Reader r(path, bytes.data() + kMagicSize, body - kMagicSize);
  ASSIGN_OR_RETURN(const uint32_t version, r.U32("version"));
  if (version != kCheckpointVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " has format version ", version,
                     "; this build reads version ", kCheckpointVersion));
  }
  CheckpointData data;
  ASSIGN_OR_RETURN(data.step, r.U64("step"));
  ASSIGN_OR_RETURN(data.epoch, r.U64("epoch"));
  ASSIGN_OR_RETURN(data.spec_fingerprint, r.String("spec fingerprint"));
  ASSIGN_OR_RETURN(const uint32_t attribute_count, r.U32("attribute count"));
  for (uint32_t a = 0; a < attribute_count; ++a) {
    ASSIGN_OR_RETURN(std::string key, r.String("attribute key"));
    ASSIGN_OR_RETURN(std::string value, r.String("attribute value"));
    data.attributes[std::move(key)] = std::move(value);
  }
  ASSIGN_OR_RETURN(const uint32_t tensor_count, r.U32("tensor count"));
  std::set<std::string> names;
  for (uint32_t t = 0; t < tensor_count; ++t) {
    CheckpointTensor tensor;
    ASSIGN_OR_RETURN(tensor.name, r.String("tensor name"));
    if (!names.insert(tensor.name).second) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: tensor \"",
                                              tensor.name, "\" appears twice"));
    }
    ASSIGN_OR_RETURN(const uint32_t rank, r.U32("tensor rank"));
    if (rank > r.remaining() / 8) return r.Truncated("tensor shape");
    uint64_t elements = 1;
    bool overflow = false;  // the product does not fit in 64 bits (unless a dim is 0)
    for (uint32_t d = 0; d < rank; ++d) {
      ASSIGN_OR_RETURN(const uint64_t dim, r.U64("tensor shape"));
      tensor.shape.push_back(dim);
      if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      elements *= dim;
    }
    if (overflow && std::find(tensor.shape.begin(), tensor.shape.end(), 0) == tensor.shape.end()) {
      // Wrapped around, the product could equal a small count: [2, 2^63 + 3] "holds" 6.
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: tensor \"",
                                              tensor.name, "\" has a shape whose element count ",
                                              "does not fit in 64 bits"));
    }
    ASSIGN_OR_RETURN(const uint64_t count, r.U64("tensor element count"));
    if (count != elements) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: tensor \"",
                                              tensor.name, "\" holds ", count,
                                              " values but its shape says ", elements));
    }
    RETURN_IF_ERROR(r.Floats(count, &tensor.data, "tensor data"));
    data.tensors.push_back(std::move(tensor));
  }
  if (r.remaining() != 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: ",
                                            r.remaining(), " unexpected bytes after the tensors"));
  }
  return data;
}

// The spec fingerprint from the first bytes of a checkpoint file (at most
// kFingerprintHeadBytes: the fixed header and a fingerprint of up to 4096 bytes).
absl::StatusOr<std::string> DecodeFingerprint(const std::string& path, const std::string& head) {
  if (head.size() < kMagicSize || std::memcmp(head.data(), kMagic, kMagicSize) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", path, " is not a ringleader checkpoint (bad magic)"));
  }
  if (head.size() < kFingerprintFixedBytes) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: truncated header"));
  }
  Reader r(path, head.data() + kFingerprintFixedBytes - 4, 4);
  ASSIGN_OR_RETURN(const uint32_t length, r.U32("spec fingerprint length"));
  if (length > kMaxFingerprintBytes) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: fingerprint of ",
                                            length, " bytes"));
  }
  if (head.size() < kFingerprintFixedBytes + length) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: truncated header"));
  }
  return head.substr(kFingerprintFixedBytes, length);
}

}  // namespace

const CheckpointTensor* CheckpointData::FindTensor(const std::string& name) const {
  for (const CheckpointTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string MomentumBufferName(const std::string& parameter_name) {
  return absl::StrCat(parameter_name, ".momentum_buffer");
}

bool IsMomentumBufferName(const std::string& name) {
  const std::string suffix = MomentumBufferName("");
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

absl::Status WriteCheckpoint(const std::string& path, const CheckpointData& data) {
  if (path.empty()) return absl::InvalidArgumentError("checkpoint path is empty");
  ASSIGN_OR_RETURN(const std::string bytes, Encode(path, data));
  return WriteFileAtomically(kKind, path, bytes, DirectoryLinks::kRefuse);
}

absl::Status WriteCheckpoint(const DirectoryHandle& dir, const std::string& name,
                             const CheckpointData& data) {
  ASSIGN_OR_RETURN(const std::string bytes, Encode(dir.PathOf(name), data));
  return dir.WriteFileAtomically(name, bytes);
}

absl::StatusOr<std::string> ReadCheckpointFingerprint(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string head, ReadFileNoFollow(kKind, path, kFingerprintHeadBytes));
  return DecodeFingerprint(path, head);
}

absl::StatusOr<std::string> ReadCheckpointFingerprint(const DirectoryHandle& dir,
                                                      const std::string& name) {
  ASSIGN_OR_RETURN(const std::string head, dir.ReadFile(name, kFingerprintHeadBytes));
  return DecodeFingerprint(dir.PathOf(name), head);
}

absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileNoFollow(kKind, path));
  return Decode(path, bytes);
}

absl::StatusOr<CheckpointData> ReadCheckpoint(const DirectoryHandle& dir,
                                              const std::string& name) {
  ASSIGN_OR_RETURN(const std::string bytes, dir.ReadFile(name));
  return Decode(dir.PathOf(name), bytes);
}

absl::StatusOr<CheckpointData> DecodeCheckpoint(const std::string& path,
                                                const std::string& bytes) {
  return Decode(path, bytes);
}

}  // namespace ringleader
