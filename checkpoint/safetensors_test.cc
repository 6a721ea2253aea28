#include "checkpoint/safetensors.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(WriteFileAtomically("test file", path, bytes).ok()) << path;
}

std::string ReadBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile("test file", path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// A safetensors file built by hand, independently of the writer: the 8-byte little-endian
// length, `header` padded with spaces to a multiple of 8, then `data`.
std::string HandBuilt(std::string header, const std::string& data) {
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return bytes + header + data;
}

std::string Raw(std::initializer_list<unsigned char> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// The u64 at the start of a safetensors file.
uint64_t HeaderLength(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8 && i < static_cast<int>(bytes.size()); ++i) {
    n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return n;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

std::vector<uint32_t> AllBits(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  for (float f : values) bits.push_back(Bits(f));
  return bits;
}

float QuietNanWithPayload() {
  const uint32_t bits = 0x7fc01234u;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

std::vector<CheckpointTensor> SampleTensors() {
  return {
      {"fc1.weight",
       {2, 3},
       {1.5f, -2.25f, -0.0f, std::numeric_limits<float>::denorm_min(),
        std::numeric_limits<float>::infinity(), QuietNanWithPayload()}},
      {"fc1.bias", {2}, {0.125f, -7.0f}},
      {"scalar", {}, {42.0f}},
      {"empty", {0}, {}},
      {"naïve.名前", {1, 1, 1}, {3.0e-8f}},
  };
}

TEST(SafetensorsTest, RoundTripIsBitExactAndKeepsOrderAndMetadata) {
  const std::string path = TempPath("round/trip/model.safetensors");  // parents are created
  const std::vector<CheckpointTensor> in = SampleTensors();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode"}};
  ASSERT_TRUE(WriteSafetensors(path, in, metadata).ok());
  EXPECT_FALSE(Exists(path + ".tmp")) << "temporary file left behind";

  absl::StatusOr<SafetensorsFile> out = ReadSafetensorsFile(path);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->metadata, metadata);
  ASSERT_EQ(out->tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out->tensors[i].name, in[i].name);
    EXPECT_EQ(out->tensors[i].shape, in[i].shape) << in[i].name;
    EXPECT_EQ(AllBits(out->tensors[i].data), AllBits(in[i].data)) << in[i].name;
  }
  absl::StatusOr<std::vector<CheckpointTensor>> tensors_only = ReadSafetensors(path);
  ASSERT_TRUE(tensors_only.ok()) << tensors_only.status();
  EXPECT_EQ(tensors_only->size(), in.size());
}

TEST(SafetensorsTest, WrittenFileHasTheSpecifiedLayout) {
  const std::string path = TempPath("layout.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, {{"a", {2}, {1.0f, -2.0f}}, {"b", {1}, {0.5f}}}, {{"format", "pt"}})
          .ok());
  const std::string bytes = ReadBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  const uint64_t n = HeaderLength(bytes);
  EXPECT_EQ(n % 8, 0u) << "header padded to a multiple of 8 bytes";
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  const std::string header = bytes.substr(8, n);
  // The JSON, then nothing but spaces.
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],)"
            R"("data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})");
  // 1.0f, -2.0f, 0.5f as little-endian IEEE 754.
  EXPECT_EQ(bytes.substr(8 + n),
            Raw({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x3f}));
}

TEST(SafetensorsTest, ReadsHandBuiltFileWithF32Bf16AndF16) {
  // Listed out of data order: the reader returns tensors in the order of their data.
  const std::string header = R"({"h":{"dtype":"F16","shape":[8],"data_offsets":[16,32]},)"
                             R"("__metadata__":{"format":"pt"},)"
                             R"("f":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}})";
  const std::string data = Raw({0x00, 0x00, 0xc0, 0x3f,     // F32 1.5
                                0x00, 0x00, 0x00, 0xc0}) +  // F32 -2
                           Raw({0xc0, 0x3f,                 // BF16 1.5
                                0x00, 0xc0,                 // BF16 -2
                                0x80, 0x7f,                 // BF16 +inf
                                0x81, 0x3f}) +              // BF16 1.0078125
                           Raw({0x00, 0x3c,                 // F16 1
                                0x00, 0xc0,                 // F16 -2
                                0x01, 0x00,                 // F16 smallest subnormal 2^-24
                                0xff, 0x7b,                 // F16 largest normal 65504
                                0x55, 0x35,                 // F16 0.333251953125
                                0x00, 0xfc,                 // F16 -inf
                                0x00, 0x7e,                 // F16 NaN
                                0x00, 0x80});               // F16 -0
  const std::string path = TempPath("hand_built.safetensors");
  WriteBytes(path, HandBuilt(header, data));

  absl::StatusOr<SafetensorsFile> file = ReadSafetensorsFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file->tensors.size(), 3u);
  const CheckpointTensor& f = file->tensors[0];
  const CheckpointTensor& b = file->tensors[1];
  const CheckpointTensor& h = file->tensors[2];
  EXPECT_EQ(f.name, "f");
  EXPECT_THAT(f.shape, ElementsAre(2));
  EXPECT_THAT(f.data, ElementsAre(1.5f, -2.0f));
  EXPECT_EQ(b.name, "b");
  EXPECT_THAT(b.shape, ElementsAre(2, 2));
  EXPECT_THAT(b.data, ElementsAre(1.5f, -2.0f, std::numeric_limits<float>::infinity(), 1.0078125f));
  EXPECT_EQ(h.name, "h");
  EXPECT_THAT(h.shape, ElementsAre(8));
  ASSERT_EQ(h.data.size(), 8u);
  EXPECT_EQ(h.data[0], 1.0f);
  EXPECT_EQ(h.data[1], -2.0f);
  EXPECT_EQ(h.data[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(h.data[3], 65504.0f);
  EXPECT_EQ(h.data[4], 0.333251953125f);
  EXPECT_EQ(h.data[5], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(h.data[6]));
  EXPECT_EQ(Bits(h.data[7]), 0x80000000u) << "negative zero";
}

TEST(SafetensorsTest, EmptyHeaderObjectIsAFileWithoutTensors) {
  const std::string path = TempPath("no_tensors.safetensors");
  WriteBytes(path, HandBuilt("{}", ""));
  absl::StatusOr<SafetensorsFile> file = ReadSafetensorsFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->tensors.empty());
  EXPECT_TRUE(file->metadata.empty());
}

TEST(SafetensorsTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("absent.safetensors");
  absl::StatusOr<SafetensorsFile> out = ReadSafetensorsFile(path);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(out.status().message(), absl::StrCat("safetensors file ", path, " does not exist"));
}

TEST(SafetensorsTest, TruncatedFilesAreDataLoss) {
  const std::string path = TempPath("truncated.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, SampleTensors(), {{"format", "pt"}}).ok());
  const std::string bytes = ReadBytes(path);
  const uint64_t header_end = 8 + HeaderLength(bytes);
  ASSERT_LT(header_end, bytes.size());
  for (size_t keep : {size_t{0}, size_t{5}, size_t{9}, static_cast<size_t>(header_end - 1),
                      static_cast<size_t>(header_end + 3), bytes.size() - 1}) {
    WriteBytes(path, bytes.substr(0, keep));
    absl::StatusOr<SafetensorsFile> out = ReadSafetensorsFile(path);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << "kept " << keep;
    EXPECT_THAT(std::string(out.status().message()),
                AllOf(HasSubstr(path), HasSubstr("is truncated")))
        << "kept " << keep;
  }
}

struct BadFile {
  const char* what;
  std::string bytes;
  absl::StatusCode code;
  std::vector<std::string> message_parts;
};

std::vector<BadFile> BadFiles() {
  const std::string f32x2(8, '\0');
  std::string huge_length = Raw({0, 0, 0, 0, 0, 1, 0, 0}) + "{}      ";  // 2^40
  return {
      {"text file",
       "hello, this is a text file and not safetensors at all",
       absl::StatusCode::kInvalidArgument,
       {"header length", "is it a safetensors file?"}},
      {"header length beyond the format's limit",
       huge_length,
       absl::StatusCode::kInvalidArgument,
       {"header length 1099511627776"}},
      {"header length 0",
       Raw({0, 0, 0, 0, 0, 0, 0, 0}) + "{}",
       absl::StatusCode::kInvalidArgument,
       {"header length 0"}},
      {"header not starting with {",
       HandBuilt("[1, 2]", ""),
       absl::StatusCode::kInvalidArgument,
       {"does not start with '{'"}},
      {"header not JSON",
       HandBuilt(R"({"a": {"dtype": )", ""),
       absl::StatusCode::kInvalidArgument,
       {"the header is not JSON"}},
      {"overlapping offsets",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0')),
       absl::StatusCode::kInvalidArgument,
       {"\"a\" [0, 8)", "\"b\" [4, 12)", "overlap"}},
      {"gap between tensors",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 std::string(12, '\0')),
       absl::StatusCode::kInvalidArgument,
       {"bytes [4, 8)", "belong to no tensor", "\"b\""}},
      {"bytes after the last tensor",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2 + "xxxx"),
       absl::StatusCode::kInvalidArgument,
       {"4 bytes after the last tensor"}},
      {"unknown dtype",
       HandBuilt(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"ids\" has dtype I64", "ringleader reads F32, BF16 and F16"}},
      {"no shape",
       HandBuilt(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"a\" has no shape"}},
      {"no dtype",
       HandBuilt(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"a\" has no dtype"}},
      {"no data_offsets",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[2]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"a\" has no data_offsets"}},
      {"negative dimension",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"a\"", "shape entry"}},
      {"size is not product(shape) x dtype size",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"tensor \"a\" has shape [3] of F32 but data_offsets [0, 8] hold 8 bytes"}},
      {"offsets ending before they begin",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", f32x2),
       absl::StatusCode::kInvalidArgument,
       {"end before they begin"}},
      {"duplicate tensor name",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 f32x2),
       absl::StatusCode::kInvalidArgument,
       {"the key \"a\" twice"}},
      {"metadata value not a string",
       HandBuilt(R"({"__metadata__":{"step":3},"a":{"dtype":"F32","shape":[2],)"
                 R"("data_offsets":[0,8]}})",
                 f32x2),
       absl::StatusCode::kInvalidArgument,
       {"__metadata__ value of \"step\""}},
      {"data shorter than the offsets",
       HandBuilt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"),
       absl::StatusCode::kDataLoss,
       {"is truncated", "8 bytes of tensor data", "holds 4"}},
  };
}

TEST(SafetensorsTest, DamagedAndForeignFilesAreRefusedWithTheRightCode) {
  const std::string path = TempPath("bad.safetensors");
  for (const BadFile& bad : BadFiles()) {
    WriteBytes(path, bad.bytes);
    absl::StatusOr<SafetensorsFile> out = ReadSafetensorsFile(path);
    EXPECT_EQ(out.status().code(), bad.code) << bad.what << ": " << out.status();
    const std::string message(out.status().message());
    EXPECT_THAT(message, HasSubstr(path)) << bad.what;
    for (const std::string& part : bad.message_parts) {
      EXPECT_THAT(message, HasSubstr(part)) << bad.what;
    }
  }
}

TEST(SafetensorsTest, WriterRefusesInconsistentTensorsAndWritesNothing) {
  const std::string path = TempPath("refused.safetensors");
  struct Case {
    const char* what;
    std::vector<CheckpointTensor> tensors;
    std::map<std::string, std::string> metadata;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"duplicate name", {{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}}, {}, "\"a\" appears twice"},
      {"reserved name", {{"__metadata__", {1}, {1.0f}}}, {}, "reserves for metadata"},
      {"size mismatch", {{"a", {2, 2}, {1.0f}}}, {}, "\"a\" has 1 values but its shape [2, 2]"},
      {"name not UTF-8", {{"bad\xff", {1}, {1.0f}}}, {}, "not valid UTF-8"},
      {"metadata not UTF-8", {{"a", {1}, {1.0f}}}, {{"k", "\xc3"}}, "not valid UTF-8"},
  };
  for (const Case& c : cases) {
    absl::Status s = WriteSafetensors(path, c.tensors, c.metadata);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(path), HasSubstr(c.message_part)))
        << c.what;
    EXPECT_FALSE(Exists(path)) << c.what << ": nothing written";
  }
}

TEST(SafetensorsTest, FailedWriteLeavesThePreviousFileUntouched) {
  // A regular file where a directory should be: mkdir fails, for root too.
  const std::string blocker = TempPath("blocker");
  WriteBytes(blocker, "x");
  absl::Status s = WriteSafetensors(blocker + "/sub/model.safetensors", SampleTensors(), {});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(blocker + "/sub/model.safetensors"));

  const std::string path = TempPath("kept.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"old", {1}, {1.0f}}}, {}).ok());
  EXPECT_FALSE(WriteSafetensors(path, {{"a", {2}, {1.0f}}}, {}).ok());
  absl::StatusOr<std::vector<CheckpointTensor>> kept = ReadSafetensors(path);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].name, "old");
}

}  // namespace
}  // namespace ringleader
