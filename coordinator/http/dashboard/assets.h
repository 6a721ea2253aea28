// The dashboard's files (index.html, job.html, dashboard.js, charts.js, dashboard.css), built
// into the coordinator: the genrule //coordinator/http/dashboard:assets_cc runs embed_assets.py
// over them and compiles the bytes in, so the coordinator serves its pages with no file and no
// network at run time.
#ifndef RINGLEADER_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_
#define RINGLEADER_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringleader {

struct DashboardAsset {
  absl::string_view name;  // the file's base name, e.g. "dashboard.js"
  absl::string_view body;  // its bytes
};

// Every embedded file, in the order the build lists them. Static storage; thread-safe.
absl::Span<const DashboardAsset> DashboardAssets();

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_
