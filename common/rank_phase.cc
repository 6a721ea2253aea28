#include "common/rank_phase.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringleader {

std::string PhaseName(v1::RankPhase phase) {
  switch (phase) {
    case v1::RANK_PHASE_STARTING: return "starting";
    case v1::RANK_PHASE_LOADING_DATA: return "loading data";
    case v1::RANK_PHASE_RESUMING: return "resuming from a checkpoint";
    case v1::RANK_PHASE_RENDEZVOUS: return "in the rendezvous";
    case v1::RANK_PHASE_CONNECTING: return "connecting";
    case v1::RANK_PHASE_TRAINING: return "training";
    case v1::RANK_PHASE_EVALUATING: return "evaluating";
    case v1::RANK_PHASE_CHECKPOINTING: return "writing a checkpoint";
    case v1::RANK_PHASE_SHUTTING_DOWN: return "shutting down";
    case v1::RANK_PHASE_RUNNING_COMMAND: return "running its command";
    default: return "";
  }
}

std::string ShortDuration(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return "0s";
  return absl::FormatDuration(
      absl::Trunc(d, d < absl::Seconds(1) ? absl::Milliseconds(1) : absl::Milliseconds(100)));
}

std::string DescribeActivity(const v1::RankActivity& activity, absl::Duration activity_age) {
  const std::string name = PhaseName(activity.phase());
  if (name.empty()) return "";
  const absl::Duration lasted = absl::Milliseconds(activity.phase_elapsed_ms()) +
                                std::max(activity_age, absl::ZeroDuration());
  return absl::StrCat(name,
                      activity.detail().empty() ? "" : absl::StrCat(" (", activity.detail(), ")"),
                      " for ", ShortDuration(lasted));
}

}  // namespace ringleader
