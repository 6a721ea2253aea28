// Strong types for identifiers, so a rank is never passed where a world size or a generation is
// expected.
#ifndef RINGLEADER_COMMON_IDS_H_
#define RINGLEADER_COMMON_IDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringleader {

// A value of type T tagged with `Tag`; compares, hashes and prints like T.
template <typename Tag, typename T>
class StrongId {
 public:
  StrongId() = default;
  explicit StrongId(T value) : value_(std::move(value)) {}
  const T& value() const { return value_; }

  friend bool operator==(const StrongId& a, const StrongId& b) { return a.value_ == b.value_; }
  friend bool operator!=(const StrongId& a, const StrongId& b) { return a.value_ != b.value_; }
  friend bool operator<(const StrongId& a, const StrongId& b) { return a.value_ < b.value_; }
  template <typename H>
  friend H AbslHashValue(H h, const StrongId& id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) { return os << id.value_; }
  template <typename Sink>
  friend void AbslStringify(Sink& sink, const StrongId& id) {
    sink.Append(absl::StrCat(id.value_));
  }

 private:
  T value_{};
};

using JobId = StrongId<struct JobIdTag, std::string>;
using WorkerId = StrongId<struct WorkerIdTag, std::string>;
using Rank = StrongId<struct RankTag, uint32_t>;
using Generation = StrongId<struct GenerationTag, uint64_t>;

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_IDS_H_
