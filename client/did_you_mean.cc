#include "client/did_you_mean.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace ringleader {

size_t EditDistance(const std::string& a, const std::string& b) {
  // One row of the dynamic-programming table suffices.
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  constexpr size_t kMaxDistance = 2;
  std::string best;
  size_t best_distance = kMaxDistance + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance && 2 * distance < word.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? "" : absl::StrCat(" (did you mean '", match, "'?)");
}

}  // namespace ringleader
