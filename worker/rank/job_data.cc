#include "worker/rank/job_data.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/data/fashion_mnist.h"

namespace ringleader {
namespace {

// Synthetic data set sizes when the spec leaves max_*_examples at 0.
constexpr size_t kSyntheticTrainDefault = 4096;
constexpr size_t kSyntheticTestDefault = 1024;

}  // namespace

absl::StatusOr<TrainTest> LoadJobData(const v1::JobSpec& spec) {
  const v1::DataSpec& data = spec.data();
  if (data.dataset() == "fashion-mnist") {
    absl::StatusOr<FashionMnist> read =
        LoadFashionMnist(data.path().empty() ? kDefaultFashionMnistDir : data.path(),
                         data.max_train_examples(), data.max_test_examples());
    // Reading the data set's files (missing, unreadable, corrupt): IO_ERROR.
    if (!read.ok()) return WithFailureKind(read.status(), v1::RankFailure::IO_ERROR);
    FashionMnist loaded = *std::move(read);
    return TrainTest{std::move(loaded.train), std::move(loaded.test)};
  }
  if (data.dataset() == "synthetic") {
    const size_t train =
        data.max_train_examples() ? data.max_train_examples() : kSyntheticTrainDefault;
    const size_t test = data.max_test_examples() ? data.max_test_examples() : kSyntheticTestDefault;
    const auto& layers = spec.model().layers();
    // One draw split in two: the class centres depend on the seed, so both halves must come
    // from the same call.
    Dataset all = MakeSyntheticDataset(
        train + test, layers.Get(0), static_cast<int>(layers.Get(layers.size() - 1)), spec.seed());
    return TrainTest{Slice(all, 0, train), Slice(all, train, train + test)};
  }
  return WithFailureKind(
      absl::InvalidArgumentError(absl::StrCat("data.dataset: unknown data set '", data.dataset(),
                                              "' (expected fashion-mnist or synthetic)")),
      v1::RankFailure::JOB_ERROR);
}

}  // namespace ringleader
