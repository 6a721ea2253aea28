// Fashion-MNIST (Zalando): 28×28 grey-scale images of 10 clothing classes, 60000 train and
// 10000 test examples, read from the four gzipped IDX files of the Debian-style package layout.
#ifndef RINGLEADER_WORKER_DATA_FASHION_MNIST_H_
#define RINGLEADER_WORKER_DATA_FASHION_MNIST_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"

namespace ringleader {

// Where the data set package installs the files.
inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Normalisation applied to each pixel p in [0, 255]: x = (p / 255 - kMean) / kStd (the
// train-set statistics torchvision users apply).
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr int kFashionMnistClasses = 10;

struct FashionMnist {
  Dataset train;  // features 784, num_classes 10
  Dataset test;
};

// Loads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz from `dir`, keeping the first max_train / max_test examples
// (0 = all).
// Errors (naming the file): NOT_FOUND if a file is missing (with the fix); INVALID_ARGUMENT for
// a file that is not the expected IDX kind, image and label counts that disagree, or a label
// outside [0, 10); DATA_LOSS for truncated or corrupt files.
absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir = kDefaultFashionMnistDir,
                                              size_t max_train = 0, size_t max_test = 0);

// Loads one split: images + labels files, first max_items examples (0 = all), normalised as
// above. Errors as LoadFashionMnist.
absl::StatusOr<Dataset> LoadIdxClassificationSplit(const std::string& images_path,
                                                   const std::string& labels_path,
                                                   size_t max_items);

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DATA_FASHION_MNIST_H_
