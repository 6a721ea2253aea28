#include "worker/rank/finish_report.h"

#include <algorithm>
#include <iostream>

#include "absl/time/clock.h"
#include "worker/rank/progress_reporter.h"

namespace ringleader {

bool DeliverFinishRank(CoordinatorClient* client, const v1::FinishRankRequest& request,
                       absl::Duration grace, absl::Duration pause,
                       const std::function<void(absl::Duration)>& sleep) {
  absl::StatusOr<v1::FinishRankResponse> finished = client->FinishRank(request);
  pause = std::max(pause, absl::Milliseconds(1));
  for (int64_t retry = 0; retry < grace / pause && !finished.ok() &&
                          IsTransient(finished.status());
       ++retry) {
    if (sleep) {
      sleep(pause);
    } else {
      absl::SleepFor(pause);
    }
    finished = client->FinishRank(request);
  }
  if (!finished.ok()) {
    std::cerr << "[ringleader-rank] FinishRank: " << finished.status() << std::endl;
  }
  const absl::StatusCode code = finished.status().code();
  return finished.ok() || code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kNotFound;
}

}  // namespace ringleader
