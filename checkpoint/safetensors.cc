#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/file_io.h"
#include "checkpoint/little_endian.h"
#include "common/bf16.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace ringleader {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kKind[] = "safetensors file";
constexpr char kMetadataKey[] = "__metadata__";
constexpr size_t kLengthSize = 8;  // the u64 header length

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(kKind, " ", path, " is not valid: ", what));
}

absl::Status Truncated(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(kKind, " ", path, " is truncated: ", what));
}

std::string Quoted(const std::string& name) { return absl::StrCat("\"", name, "\""); }

// ---- writing ----

// INVALID_ARGUMENT for tensors WriteSafetensors cannot write.
absl::Status CheckWritable(const std::string& path, const std::vector<CheckpointTensor>& tensors) {
  std::set<std::string> names;
  for (const CheckpointTensor& t : tensors) {
    const auto refuse = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(kKind, " ", path, ": tensor ", Quoted(t.name), " ", what));
    };
    if (t.name == kMetadataKey) return refuse("has the name safetensors reserves for metadata");
    if (!names.insert(t.name).second) return refuse("appears twice; names must be unique");
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    if (elements != t.data.size()) {
      return refuse(absl::StrCat("has ", t.data.size(), " values but its shape [",
                                 absl::StrJoin(t.shape, ", "), "] holds ", elements));
    }
  }
  return absl::OkStatus();
}

// The JSON header, padded with spaces to a multiple of 8 bytes.
absl::StatusOr<std::string> EncodeHeader(const std::string& path,
                                         const std::vector<CheckpointTensor>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const CheckpointTensor& t : tensors) {
    const uint64_t end = offset + sizeof(float) * t.data.size();
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();  // throws for strings that are not valid UTF-8
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKind, " ", path, ": a tensor name or metadata string is not valid UTF-8 (",
                     e.what(), ")"));
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

// ---- reading ----

// The dtypes this reader converts to float.
enum class Dtype { kF32, kBF16, kF16 };

std::optional<Dtype> ParseDtype(const std::string& name) {
  if (name == "F32") return Dtype::kF32;
  if (name == "BF16") return Dtype::kBF16;
  if (name == "F16") return Dtype::kF16;
  return std::nullopt;
}

size_t DtypeSize(Dtype dtype) { return dtype == Dtype::kF32 ? 4 : 2; }

// One header entry, validated on its own.
struct Entry {
  std::string name;
  std::string dtype_name;
  Dtype dtype = Dtype::kF32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// IEEE 754 binary16 to float; exact (float has more exponent and mantissa bits).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  // Infinity / NaN keep an all-ones exponent (and the NaN payload); normals are re-biased.
  const uint32_t exponent32 = exponent == 0x1fu ? 0xffu : exponent + (127 - 15);
  const uint32_t bits = sign | (exponent32 << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Rejects duplicate keys in every object of the header, which a JSON parser would otherwise
// resolve silently (the last one wins). Records the first duplicate it sees.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (event == Event::object_start) keys_.emplace_back();
    if (event == Event::object_end) keys_.pop_back();
    if (event == Event::key && !keys_.back().insert(parsed.get<std::string>()).second &&
        duplicate_.empty()) {
      duplicate_ = parsed.get<std::string>();
    }
    return true;
  }
  const std::string& duplicate() const { return duplicate_; }

 private:
  std::vector<std::set<std::string>> keys_;
  std::string duplicate_;
};

absl::StatusOr<Json> ParseHeader(const std::string& path, const char* begin, const char* end) {
  if (begin == end || *begin != '{') {
    return Invalid(path, "the header does not start with '{'");
  }
  DuplicateKeyCheck check;
  Json header;
  try {
    header = Json::parse(begin, end, std::ref(check));
  } catch (const Json::exception& e) {  // parse_error: syntax, invalid UTF-8, ...
    return Invalid(path, absl::StrCat("the header is not JSON: ", e.what()));
  }
  if (!header.is_object()) return Invalid(path, "the header is not a JSON object");
  if (!check.duplicate().empty()) {
    return Invalid(path,
                   absl::StrCat("the header has the key ", Quoted(check.duplicate()), " twice"));
  }
  return header;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const std::string& path,
                                                                 const Json& value) {
  if (!value.is_object()) return Invalid(path, "__metadata__ is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return Invalid(path, absl::StrCat("__metadata__ value of ", Quoted(key),
                                        " is not a string (safetensors metadata is str→str)"));
    }
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// *out = product(shape) × element_size; false if that overflows.
bool ByteSize(const std::vector<uint64_t>& shape, size_t element_size, uint64_t* out) {
  uint64_t size = element_size;
  for (uint64_t d : shape) {
    if (d != 0 && size > std::numeric_limits<uint64_t>::max() / d) return false;
    size *= d;
  }
  *out = size;
  return true;
}

absl::StatusOr<Entry> ParseEntry(const std::string& path, const std::string& name,
                                 const Json& value) {
  const auto bad = [&](const std::string& what) {
    return Invalid(path, absl::StrCat("tensor ", Quoted(name), " ", what));
  };
  if (!value.is_object()) return bad("is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) return bad(absl::StrCat("has no ", field));
  }
  Entry entry;
  entry.name = name;
  const Json& dtype = value["dtype"];
  if (!dtype.is_string()) return bad("has a dtype that is not a string");
  entry.dtype_name = dtype.get<std::string>();
  const std::optional<Dtype> parsed_dtype = ParseDtype(entry.dtype_name);
  if (!parsed_dtype.has_value()) {
    return bad(
        absl::StrCat("has dtype ", entry.dtype_name, "; ringleader reads F32, BF16 and F16"));
  }
  entry.dtype = *parsed_dtype;
  const size_t element_size = DtypeSize(entry.dtype);
  const Json& shape = value["shape"];
  if (!shape.is_array()) return bad("has a shape that is not an array");
  for (const Json& d : shape) {
    if (!d.is_number_unsigned()) return bad("has a shape entry that is not an integer >= 0");
    entry.shape.push_back(d.get<uint64_t>());
  }
  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return bad("has data_offsets that are not two integers >= 0");
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.end < entry.begin) {
    return bad(absl::StrCat("has data_offsets [", entry.begin, ", ", entry.end,
                            "] that end before they begin"));
  }
  uint64_t expected = 0;
  if (!ByteSize(entry.shape, element_size, &expected) || expected != entry.end - entry.begin) {
    return bad(absl::StrCat("has shape [", absl::StrJoin(entry.shape, ", "), "] of ",
                            entry.dtype_name, " but data_offsets [", entry.begin, ", ", entry.end,
                            "] hold ", entry.end - entry.begin, " bytes"));
  }
  return entry;
}

std::string Range(const Entry& e) {
  return absl::StrCat(Quoted(e.name), " [", e.begin, ", ", e.end, ")");
}

// Sorts `entries` by position and checks that they tile [0, data_size) exactly.
absl::Status CheckLayout(const std::string& path, uint64_t data_size, std::vector<Entry>* entries) {
  std::stable_sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t position = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const Entry& e = (*entries)[i];
    if (e.begin < position) {
      return Invalid(path, absl::StrCat("the data of tensors ", Range((*entries)[i - 1]), " and ",
                                        Range(e), " overlap"));
    }
    if (e.begin > position) {
      return Invalid(path,
                     absl::StrCat("bytes [", position, ", ", e.begin,
                                  ") of the data belong to no tensor (before ", Range(e), ")"));
    }
    position = e.end;
  }
  if (position > data_size) {
    return Truncated(path, absl::StrCat("the header describes ", position,
                                        " bytes of tensor data but the file holds ", data_size));
  }
  if (position < data_size) {
    return Invalid(path, absl::StrCat(data_size - position,
                                      " bytes after the last tensor belong to no tensor"));
  }
  return absl::OkStatus();
}

// The tensor `e` describes, widened to float; `data` is the start of the data section.
CheckpointTensor DecodeTensor(const Entry& e, const char* data) {
  CheckpointTensor t;
  t.name = e.name;
  t.shape = e.shape;
  const char* p = data + e.begin;
  const size_t count = (e.end - e.begin) / DtypeSize(e.dtype);
  t.data.resize(count);
  switch (e.dtype) {
    case Dtype::kF32:
      LoadFloats32(p, count, t.data.data());
      break;
    case Dtype::kBF16:
      for (size_t k = 0; k < count; ++k) {
        t.data[k] = Bf16ToFloat(LoadLittleEndian<uint16_t>(p + 2 * k));
      }
      break;
    case Dtype::kF16:
      for (size_t k = 0; k < count; ++k) {
        t.data[k] = HalfToFloat(LoadLittleEndian<uint16_t>(p + 2 * k));
      }
      break;
  }
  return t;
}

// The header length, checked against the file's size. A length that points past the end is
// truncation when the header starts as one does, and another kind of file otherwise.
absl::StatusOr<uint64_t> HeaderLength(const std::string& path, const std::string& bytes) {
  if (bytes.size() < kLengthSize) {
    return Truncated(
        path, absl::StrCat("only ", bytes.size(), " bytes, fewer than the 8-byte header length"));
  }
  const uint64_t n = LoadLittleEndian<uint64_t>(bytes.data());
  if (n == 0 || n > kSafetensorsMaxHeaderSize) {
    return Invalid(path, absl::StrCat("header length ", n, " is not in [1, ",
                                      kSafetensorsMaxHeaderSize, "]; is it a safetensors file?"));
  }
  const uint64_t available = bytes.size() - kLengthSize;
  if (n > available) {
    const std::string what =
        absl::StrCat("the header length is ", n, " bytes but only ", available, " follow it");
    if (available > 0 && bytes[kLengthSize] == '{') return Truncated(path, what);
    return Invalid(path, absl::StrCat(what, "; is it a safetensors file?"));
  }
  return n;
}

absl::StatusOr<SafetensorsFile> DecodeFile(const std::string& path, const std::string& bytes) {
  ASSIGN_OR_RETURN(const uint64_t header_length, HeaderLength(path, bytes));
  const char* header_begin = bytes.data() + kLengthSize;
  ASSIGN_OR_RETURN(const Json header,
                   ParseHeader(path, header_begin, header_begin + header_length));
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      ASSIGN_OR_RETURN(file.metadata, ParseMetadata(path, value));
      continue;
    }
    ASSIGN_OR_RETURN(Entry entry, ParseEntry(path, name, value));
    entries.push_back(std::move(entry));
  }
  const uint64_t data_start = kLengthSize + header_length;
  RETURN_IF_ERROR(CheckLayout(path, bytes.size() - data_start, &entries));
  for (const Entry& e : entries) file.tensors.push_back(DecodeTensor(e, bytes.data() + data_start));
  return file;
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<CheckpointTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  if (path.empty()) return absl::InvalidArgumentError("safetensors path is empty");
  RETURN_IF_ERROR(CheckWritable(path, tensors));
  ASSIGN_OR_RETURN(const std::string header, EncodeHeader(path, tensors, metadata));
  std::string bytes;
  size_t data_size = 0;
  for (const CheckpointTensor& t : tensors) data_size += sizeof(float) * t.data.size();
  bytes.reserve(kLengthSize + header.size() + data_size);
  AppendLittleEndian<uint64_t>(&bytes, header.size());
  bytes.append(header);
  for (const CheckpointTensor& t : tensors) {
    AppendFloats32(&bytes, t.data.data(), t.data.size());
  }
  return WriteFileAtomically(kKind, path, bytes);
}

absl::StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(kKind, path));
  return DecodeFile(path, bytes);
}

absl::StatusOr<std::vector<CheckpointTensor>> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(SafetensorsFile file, ReadSafetensorsFile(path));
  return std::move(file.tensors);
}

}  // namespace ringleader
