#include "worker/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

constexpr char kMagic[] = "RLCKPT01";
constexpr size_t kMagicSize = 8;

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::ErrnoToStatus(err, what);
}

// ---- encoding (explicit little-endian, independent of the host) ----

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
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
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p_[i])} << (8 * i);
    p_ += 4;
    return v;
  }
  absl::StatusOr<uint64_t> U64(const char* what) {
    RETURN_IF_ERROR(Need(8, what));
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p_[i])} << (8 * i);
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
    for (size_t k = 0; k < count; ++k) {
      uint32_t bits = 0;
      for (int i = 0; i < 4; ++i) bits |= uint32_t{static_cast<unsigned char>(p_[i])} << (8 * i);
      std::memcpy(&(*out)[k], &bits, 4);
      p_ += 4;
    }
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
    for (float f : t.data) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      PutU32(&out, bits);
    }
  }
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()),
                          static_cast<uInt>(out.size()));
  PutU32(&out, static_cast<uint32_t>(crc));
  return out;
}

// mkdir -p of the directory part of `path`.
absl::Status MakeParentDirectories(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return absl::OkStatus();
  const std::string dir = path.substr(0, slash);
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("checkpoint ", path, ": cannot create directory ",
                                            prefix));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("checkpoint ", what, ": write failed"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// fsync of the directory that holds `path`, so the rename itself is durable.
absl::Status SyncParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("checkpoint ", path, ": cannot open directory ", dir));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    return ErrnoError(err, absl::StrCat("checkpoint ", path, ": fsync of directory ", dir));
  }
  return absl::OkStatus();
}

absl::Status WriteTempFile(const std::string& tmp, const std::string& bytes) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("checkpoint ", tmp, ": cannot create"));
  absl::Status status = WriteAll(fd, bytes, tmp);
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoError(errno, absl::StrCat("checkpoint ", tmp, ": fsync failed"));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoError(errno, absl::StrCat("checkpoint ", tmp, ": close failed"));
  }
  return status;
}

}  // namespace

const CheckpointTensor* CheckpointData::FindTensor(const std::string& name) const {
  for (const CheckpointTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::Status WriteCheckpoint(const std::string& path, const CheckpointData& data) {
  if (path.empty()) return absl::InvalidArgumentError("checkpoint path is empty");
  ASSIGN_OR_RETURN(const std::string bytes, Encode(path, data));
  RETURN_IF_ERROR(MakeParentDirectories(path));
  const std::string tmp = path + ".tmp";
  absl::Status status = WriteTempFile(tmp, bytes);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, absl::StrCat("checkpoint ", path, ": rename from ", tmp));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // best effort; the old checkpoint is untouched
    return status;
  }
  return SyncParentDirectory(path);
}

absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", path, " does not exist"));
    }
    return ErrnoError(errno, absl::StrCat("checkpoint ", path, ": cannot open"));
  }
  std::string bytes;
  char chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoError(err, absl::StrCat("checkpoint ", path, ": read failed"));
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);

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
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
                          static_cast<uInt>(body));
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
    for (uint32_t d = 0; d < rank; ++d) {
      ASSIGN_OR_RETURN(const uint64_t dim, r.U64("tensor shape"));
      tensor.shape.push_back(dim);
      elements *= dim;
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

}  // namespace ringleader
