// The charts of `ringleader plot`: a job's per-step, per-rank metrics (GetJobMetricsResponse) as
// one SVG document, in plain C++ (no library). The dashboard's job page draws the same panels in
// JavaScript (coordinator/http/dashboard/charts.js).
//
//   ┌ title ─────────────────────────────────────────────┐
//   │ loss                  │ grad norm: synced vs local │   one panel per quantity, two
//   │ drift                 │ step time (ms)             │   columns; in each, one polyline
//   │ samples/s             │                            │   per rank (grad norm: two, synced
//   └────────────────────────────────────────────────────┘   solid and local dashed)
//
// Each panel has a y axis with "nice" ticks (1, 2, 2.5 or 5 x 10^k) and labels, an x axis of
// steps, its title and a legend (one entry per rank). Every coordinate is absolute (no
// transforms) and inside the panel's plot area, which its <g> names in data-plot-area="x0 y0 x1
// y1"; every polyline carries data-panel, data-rank, data-series ("value", or "synced" and
// "local") and data-points (its number of points). Points whose value is not finite (a NaN
// loss) are left out, as are drift points of steps without a drift check; a panel without any
// point says so instead of drawing lines.
#ifndef RINGLEADER_CLIENT_PLOT_SVG_H_
#define RINGLEADER_CLIENT_PLOT_SVG_H_

#include <string>
#include <vector>

#include "proto/ringleader.pb.h"

namespace ringleader {

// The panels' ids, in drawing order: "loss", "grad_norm", "drift", "step_ms",
// "samples_per_second".
std::vector<std::string> PlotPanelIds();

// An axis from `min` to `max` rounded out to about `intervals` nice intervals (`integer`: a
// step of at least 1). A degenerate range (min == max) is widened: [0, 1] around 0, ±10%
// otherwise.
struct PlotAxis {
  double lo = 0;
  double hi = 1;
  double step = 1;
  std::vector<double> ticks;  // lo, lo + step, ..., hi
};
PlotAxis NiceAxis(double min, double max, int intervals, bool integer);

// A tick label: "0", fixed decimals that show `step`, or the exponent form ("2.0e-5") for
// magnitudes below 1e-3 or from 1e6.
std::string FormatTick(double value, double step);

// The whole SVG document (UTF-8, starting with the XML declaration). `title` is shown at the
// top (escaped).
std::string MetricsSvg(const v1::GetJobMetricsResponse& metrics, const std::string& title);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_PLOT_SVG_H_
