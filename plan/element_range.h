// Elements [begin, end) of one tensor: what a rank owns of a parameter when the optimizer state
// is sharded (shard_plan.h, zero2_plan.h). A plain value type.
#ifndef RINGLEADER_PLAN_ELEMENT_RANGE_H_
#define RINGLEADER_PLAN_ELEMENT_RANGE_H_

#include <cstddef>

namespace ringleader {

// Elements [begin, end) of one tensor (a rank's shard of a parameter under strategy zero1).
struct ElementRange {
  size_t begin = 0;
  size_t end = 0;

  size_t size() const { return end - begin; }
  bool empty() const { return end == begin; }
  friend bool operator==(const ElementRange& a, const ElementRange& b) {
    return a.begin == b.begin && a.end == b.end;
  }
  friend bool operator!=(const ElementRange& a, const ElementRange& b) { return !(a == b); }
};

}  // namespace ringleader

#endif  // RINGLEADER_PLAN_ELEMENT_RANGE_H_
