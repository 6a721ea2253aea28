#include "worker/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/fashion_mnist.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

void PutBigEndian(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

// An IDX file: magic, sizes, then `payload`.
std::string Idx(uint32_t magic, const std::vector<uint32_t>& sizes, const std::string& payload) {
  std::string out;
  PutBigEndian(&out, magic);
  for (uint32_t s : sizes) PutBigEndian(&out, s);
  return out + payload;
}

std::string WriteGz(const std::string& name, const std::string& bytes) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
  return path;
}

std::string Pixels(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((i * 37) % 256));
  return s;
}

TEST(IdxReaderTest, ReadsImagesAndLabels) {
  const std::string images = WriteGz("img.gz", Idx(0x803, {3, 2, 2}, Pixels(12)));
  const std::string labels = WriteGz("lab.gz", Idx(0x801, {3}, std::string("\x01\x09\x00", 3)));
  absl::StatusOr<IdxImages> img = ReadIdxImages(images);
  ASSERT_TRUE(img.ok()) << img.status();
  EXPECT_EQ(img->count, 3u);
  EXPECT_EQ(img->rows, 2u);
  EXPECT_EQ(img->cols, 2u);
  const std::string expected = Pixels(12);
  EXPECT_EQ(std::string(img->pixels.begin(), img->pixels.end()), expected);
  absl::StatusOr<std::vector<uint8_t>> lab = ReadIdxLabels(labels);
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_EQ(*lab, (std::vector<uint8_t>{1, 9, 0}));

  // max_items keeps a prefix.
  img = ReadIdxImages(images, 2);
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->count, 2u);
  EXPECT_EQ(img->pixels.size(), 8u);
  EXPECT_EQ(ReadIdxLabels(labels, 1)->size(), 1u);
}

TEST(IdxReaderTest, TruncatedFileIsDataLossNamingTheFile) {
  const std::string path = WriteGz("short.gz", Idx(0x803, {3, 2, 2}, Pixels(9)));
  absl::StatusOr<IdxImages> img = ReadIdxImages(path);
  EXPECT_EQ(img.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(img.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(img.status().message()), HasSubstr("truncated"));
  const std::string header_only = WriteGz("hdr.gz", std::string("\x00\x00\x08", 3));
  EXPECT_EQ(ReadIdxLabels(header_only).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IdxReaderTest, BadMagicIsInvalidArgumentNamingTheFile) {
  const std::string labels = WriteGz("labels_as_images.gz", Idx(0x801, {3}, "abc"));
  absl::StatusOr<IdxImages> img = ReadIdxImages(labels);
  EXPECT_EQ(img.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(img.status().message()), HasSubstr(labels));
  EXPECT_THAT(std::string(img.status().message()), HasSubstr("bad magic"));
}

TEST(IdxReaderTest, CorruptGzipStreamIsDataLoss) {
  std::string bytes;
  {
    const std::string path = WriteGz("good.gz", Idx(0x803, {50, 28, 28}, Pixels(50 * 784)));
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  // Keep the gzip header, cut the deflate stream in half.
  const std::string path = absl::StrCat(::testing::TempDir(), "/cut.gz");
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size() / 2, f);
  std::fclose(f);
  absl::StatusOr<IdxImages> img = ReadIdxImages(path);
  EXPECT_EQ(img.status().code(), absl::StatusCode::kDataLoss) << img.status();
  EXPECT_THAT(std::string(img.status().message()), HasSubstr(path));
}

TEST(IdxReaderTest, MissingFileIsNotFoundWithTheFix) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/absent-idx3-ubyte.gz");
  absl::StatusOr<IdxImages> img = ReadIdxImages(path);
  EXPECT_EQ(img.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(img.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(img.status().message()), HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(std::string(img.status().message()), HasSubstr("data.path"));
}

TEST(IdxSplitTest, NormalisesPixelsAndChecksLabels) {
  std::string pixels = std::string("\x00\xff", 2) + Pixels(6);
  const std::string images = WriteGz("split_img.gz", Idx(0x803, {2, 2, 2}, pixels));
  const std::string labels = WriteGz("split_lab.gz", Idx(0x801, {2}, std::string("\x03\x07", 2)));
  absl::StatusOr<Dataset> d = LoadIdxClassificationSplit(images, labels, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size, 2u);
  EXPECT_EQ(d->features, 4u);
  EXPECT_EQ(d->num_classes, 10);
  EXPECT_EQ(d->y, (std::vector<int32_t>{3, 7}));
  EXPECT_NEAR(d->x[0], (0.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_NEAR(d->x[1], (1.0 - 0.2860) / 0.3530, 1e-6);

  const std::string bad_labels =
      WriteGz("bad_lab.gz", Idx(0x801, {2}, std::string("\x03\x0a", 2)));
  absl::StatusOr<Dataset> bad = LoadIdxClassificationSplit(images, bad_labels, 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(bad_labels));

  const std::string three_labels =
      WriteGz("three_lab.gz", Idx(0x801, {3}, std::string("\x01\x02\x03", 3)));
  bad = LoadIdxClassificationSplit(images, three_labels, 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("same split"));
}

TEST(FashionMnistTest, LoadsTheInstalledDataSet) {
  struct stat st;
  if (::stat(kDefaultFashionMnistDir, &st) != 0) {
    GTEST_SKIP() << kDefaultFashionMnistDir << " is absent (package dataset-fashion-mnist)";
  }
  absl::StatusOr<FashionMnist> data = LoadFashionMnist(kDefaultFashionMnistDir, 0, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.size, 60000u);
  EXPECT_EQ(data->test.size, 10000u);
  EXPECT_EQ(data->train.features, 784u);
  EXPECT_EQ(data->train.x.size(), 60000u * 784u);
  // Fashion-MNIST is balanced: 6000 / 1000 examples per class.
  std::vector<int> train_counts(10, 0), test_counts(10, 0);
  for (int32_t y : data->train.y) ++train_counts.at(y);
  for (int32_t y : data->test.y) ++test_counts.at(y);
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
  // The normalisation constants are the train set's statistics: mean ~0, std ~1.
  double sum = 0.0, sum_sq = 0.0;
  for (float v : data->train.x) {
    sum += v;
    sum_sq += double{v} * v;
  }
  const double n = static_cast<double>(data->train.x.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum_sq / n - (sum / n) * (sum / n)), 1.0, 0.01);

  absl::StatusOr<FashionMnist> slice = LoadFashionMnist(kDefaultFashionMnistDir, 100, 50);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->train.size, 100u);
  EXPECT_EQ(slice->test.size, 50u);
  EXPECT_EQ(slice->train.y, std::vector<int32_t>(data->train.y.begin(), data->train.y.begin() + 100));
}

TEST(FashionMnistTest, MissingDirectoryNamesTheFileAndTheFix) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/no-such-dir");
  absl::StatusOr<FashionMnist> data = LoadFashionMnist(dir, 0, 0);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(data.status().message()), HasSubstr("train-images-idx3-ubyte.gz"));
  EXPECT_THAT(std::string(data.status().message()), HasSubstr("set data.path"));
}

}  // namespace
}  // namespace ringleader
