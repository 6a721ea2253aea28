#include "worker/rank/gpu/local_norm_notes.h"

#include <algorithm>

namespace ringleader {

LocalNormNotes::Launch LocalNormNotes::Note(size_t i) {
  const bool again = noted_[i];
  noted_[i] = true;
  any_ = true;
  return again ? Launch::kAdd : Launch::kWrite;
}

double LocalNormNotes::Take(const std::vector<double>& partials, size_t blocks) {
  double sum = 0;
  for (size_t i = 0; i < noted_.size(); ++i) {
    if (!noted_[i]) continue;
    for (size_t k = 0; k < blocks; ++k) sum += partials[i * blocks + k];
  }
  Clear();
  return sum;
}

void LocalNormNotes::Clear() {
  std::fill(noted_.begin(), noted_.end(), false);
  any_ = false;
}

}  // namespace ringleader
