#include "worker/data/fashion_mnist.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/data/idx_reader.h"

namespace ringleader {

absl::StatusOr<Dataset> LoadIdxClassificationSplit(const std::string& images_path,
                                                   const std::string& labels_path,
                                                   size_t max_items) {
  ASSIGN_OR_RETURN(IdxImages images, ReadIdxImages(images_path, max_items));
  ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadIdxLabels(labels_path, max_items));
  if (labels.size() != images.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": has ", labels.size(), " labels but ", images_path, " has ", images.count,
        " images; the two files must come from the same split"));
  }
  Dataset d;
  d.size = images.count;
  d.features = images.rows * images.cols;
  d.num_classes = kFashionMnistClasses;
  d.x.resize(images.pixels.size());
  // Precomputed per byte value: the same float for a pixel everywhere, and cheaper.
  float table[256];
  for (int p = 0; p < 256; ++p) {
    table[p] = (static_cast<float>(p) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  for (size_t i = 0; i < images.pixels.size(); ++i) d.x[i] = table[images.pixels[i]];
  d.y.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kFashionMnistClasses) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", int{labels[i]},
                                                     " of example ", i, " is outside [0, ",
                                                     kFashionMnistClasses, ")"));
    }
    d.y[i] = labels[i];
  }
  return d;
}

absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir, size_t max_train,
                                              size_t max_test) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  FashionMnist data;
  ASSIGN_OR_RETURN(data.train,
                   LoadIdxClassificationSplit(base + "train-images-idx3-ubyte.gz",
                                              base + "train-labels-idx1-ubyte.gz", max_train));
  ASSIGN_OR_RETURN(data.test,
                   LoadIdxClassificationSplit(base + "t10k-images-idx3-ubyte.gz",
                                              base + "t10k-labels-idx1-ubyte.gz", max_test));
  return data;
}

}  // namespace ringleader
