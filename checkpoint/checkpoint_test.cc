#include "checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name);
}

std::string ReadBytes(const std::string& path) {
  std::string bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return bytes;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

CheckpointData Sample() {
  CheckpointData d;
  d.step = 1234;
  d.epoch = 3;
  d.spec_fingerprint = "0123456789abcdef";
  d.attributes["world_size"] = "4";
  d.attributes["generation"] = "2";
  d.tensors.push_back({"fc1.weight", {2, 3}, {1.5f, -2.25f, 0.0f, 3.0e-8f, -0.0f, 1e30f}});
  d.tensors.push_back({"fc1.bias", {2}, {0.125f, -7.0f}});
  d.tensors.push_back({"scalar", {}, {42.0f}});
  d.tensors.push_back({"empty", {0}, {}});
  return d;
}

TEST(CheckpointTest, RoundTripKeepsEverything) {
  const std::string path = TempPath("round/trip/ckpt.bin");  // parent directories are created
  const CheckpointData in = Sample();
  ASSERT_TRUE(WriteCheckpoint(path, in).ok());
  struct stat st;
  EXPECT_NE(::stat((path + ".tmp").c_str(), &st), 0) << "temporary file left behind";
  absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->step, in.step);
  EXPECT_EQ(out->epoch, in.epoch);
  EXPECT_EQ(out->spec_fingerprint, in.spec_fingerprint);
  EXPECT_EQ(out->attributes, in.attributes);
  ASSERT_EQ(out->tensors.size(), in.tensors.size());
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    EXPECT_EQ(out->tensors[i].name, in.tensors[i].name);
    EXPECT_EQ(out->tensors[i].shape, in.tensors[i].shape);
    EXPECT_EQ(out->tensors[i].data, in.tensors[i].data);  // bit-exact floats
  }
  ASSERT_NE(out->FindTensor("fc1.bias"), nullptr);
  EXPECT_EQ(out->FindTensor("fc1.bias")->data[1], -7.0f);
  EXPECT_EQ(out->FindTensor("nope"), nullptr);
  EXPECT_EQ(ReadBytes(path).substr(0, 8), "RLCKPT01");
}

TEST(CheckpointTest, OverwriteReplacesTheOldCheckpoint) {
  const std::string path = TempPath("overwrite.ckpt");
  CheckpointData d = Sample();
  ASSERT_TRUE(WriteCheckpoint(path, d).ok());
  d.step = 2000;
  d.tensors.resize(1);
  ASSERT_TRUE(WriteCheckpoint(path, d).ok());
  absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->step, 2000u);
  EXPECT_EQ(out->tensors.size(), 1u);
}

TEST(CheckpointTest, FlippedByteIsDetected) {
  const std::string path = TempPath("corrupt.ckpt");
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  std::string bytes = ReadBytes(path);
  for (size_t at : {size_t{20}, bytes.size() / 2, bytes.size() - 6}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x10;
    WriteBytes(path, damaged);
    absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << "byte " << at;
    EXPECT_EQ(out.status().message(),
              absl::StrCat("checkpoint ", path, " is corrupt: checksum mismatch"));
  }
}

TEST(CheckpointTest, TruncatedFileIsDataLoss) {
  const std::string path = TempPath("truncated.ckpt");
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  const std::string bytes = ReadBytes(path);
  for (size_t keep : {size_t{10}, size_t{40}, bytes.size() - 1}) {
    WriteBytes(path, bytes.substr(0, keep));
    absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << "kept " << keep;
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(path));
  }
}

TEST(CheckpointTest, OtherFilesAndVersionsAreRejected) {
  const std::string path = TempPath("not_a_checkpoint");
  WriteBytes(path, "hello, this is a text file and not a checkpoint");
  absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr(path));

  // A well-formed file of a future version: valid checksum, version 2.
  const std::string v2 = TempPath("v2.ckpt");
  ASSERT_TRUE(WriteCheckpoint(v2, CheckpointData()).ok());
  std::string bytes = ReadBytes(v2);
  bytes[8] = 2;
  bytes.resize(bytes.size() - 4);
  const uint32_t crc = static_cast<uint32_t>(crc32(
      crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  WriteBytes(v2, bytes);
  out = ReadCheckpoint(v2);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("version 2"));
}

TEST(CheckpointTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("absent.ckpt");
  absl::StatusOr<CheckpointData> out = ReadCheckpoint(path);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr(path));
}

TEST(CheckpointTest, InconsistentDataIsRefusedBeforeWriting) {
  const std::string path = TempPath("bad_input.ckpt");
  CheckpointData d = Sample();
  d.tensors.push_back(d.tensors[0]);
  absl::Status s = WriteCheckpoint(path, d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fc1.weight"));
  d = Sample();
  d.tensors[1].shape = {3};
  EXPECT_EQ(WriteCheckpoint(path, d).code(), absl::StatusCode::kInvalidArgument);
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0) << "nothing written";
}

TEST(CheckpointTest, UnwritableDirectoryIsAnErrorNamingThePath) {
  // A regular file where a directory should be: mkdir fails for root too.
  const std::string blocker = TempPath("blocker");
  WriteBytes(blocker, "x");
  const std::string path = blocker + "/sub/ckpt";
  absl::Status s = WriteCheckpoint(path, Sample());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

TEST(CheckpointTest, ALinkAtThePathIsReplacedByTheCheckpointNotWrittenThrough) {
  const std::string target = TempPath("link_target");
  WriteBytes(target, "someone else's file");
  const std::string path = TempPath("final_link.ckpt");
  ::unlink(path.c_str());
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  absl::StatusOr<CheckpointData> through = ReadCheckpoint(path);
  EXPECT_EQ(through.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(through.status().message()), HasSubstr(path + " is a symbolic link"));

  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  EXPECT_EQ(ReadBytes(target), "someone else's file");
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step, Sample().step);
}

}  // namespace
}  // namespace ringleader
