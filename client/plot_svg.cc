#include "client/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

// Geometry of one panel (as charts.js draws it) and of the page.
constexpr double kPanelWidth = 480;
constexpr double kPlotBottom = 200;  // from the panel's top: title, plot, then the x axis
constexpr double kMarginLeft = 58;
constexpr double kMarginRight = 24;
constexpr double kMarginTop = 30;
constexpr double kMarginBottom = 36;
constexpr double kLegendRow = 18;
constexpr double kLegendItem = 92;
constexpr double kColumnGap = 16;
constexpr double kRowGap = 12;
constexpr double kPageMargin = 12;
constexpr double kTitleHeight = 34;
constexpr int kColumns = 2;

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string RankColor(uint32_t rank) {
  return kColors[rank % (sizeof(kColors) / sizeof(*kColors))];
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Series {
  const char* id;
  double (*value)(const v1::MetricsPoint&);
  bool dashed;
};

struct Panel {
  const char* id;
  const char* title;
  const char* empty;
  std::vector<Series> series;
};

const std::vector<Panel>& Panels() {
  static const auto* panels = new std::vector<Panel>{
      {"loss",
       "loss",
       "no step reported yet",
       {{"value", [](const v1::MetricsPoint& p) { return p.loss(); }, false}}},
      {"grad_norm",
       "grad norm: synced (solid) vs local (dashed)",
       "no step reported yet",
       {{"synced", [](const v1::MetricsPoint& p) { return p.synced_grad_norm(); }, false},
        {"local", [](const v1::MetricsPoint& p) { return p.local_grad_norm(); }, true}}},
      {"drift",
       "drift max|W_r \xE2\x88\x92 W_0|",
       "no drift measured yet",
       {{"value", [](const v1::MetricsPoint& p) { return p.has_drift() ? p.drift() : kNaN; },
         false}}},
      {"step_ms",
       "step time (ms)",
       "no step reported yet",
       {{"value", [](const v1::MetricsPoint& p) { return p.step_ms(); }, false}}},
      {"samples_per_second",
       "samples/s",
       "no step reported yet",
       {{"value", [](const v1::MetricsPoint& p) { return p.samples_per_second(); }, false}}},
  };
  return *panels;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double value) { return absl::StrFormat("%.1f", value); }

// One line of one rank: its (step, value) points.
struct Line {
  uint32_t rank;
  const Series* series;
  std::vector<std::pair<double, double>> points;
};

// Draws one panel with its top-left corner at (x, y); returns its height.
double DrawPanel(const Panel& panel, const std::vector<Line>& lines,
                 const std::vector<uint32_t>& ranks, double x, double y, std::string* svg) {
  const int per_row = static_cast<int>((kPanelWidth - kMarginLeft) / kLegendItem);
  const size_t legend_items = ranks.size() + (panel.series.size() > 1 ? 2 : 0);
  const double rows = std::ceil(static_cast<double>(legend_items) / per_row);
  const double height = kPlotBottom + kMarginBottom + rows * kLegendRow;
  const double left = x + kMarginLeft, right = x + kPanelWidth - kMarginRight;
  const double top = y + kMarginTop, bottom = y + kPlotBottom;

  absl::StrAppend(svg, "<g class=\"panel\" data-panel=\"", panel.id, "\" data-plot-area=\"",
                  Num(left), " ", Num(top), " ", Num(right), " ", Num(bottom), "\">\n");
  absl::StrAppend(svg, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(kPanelWidth),
                  "\" height=\"", Num(height),
                  "\" fill=\"#ffffff\" stroke=\"#e3e6eb\" rx=\"4\"/>\n");
  absl::StrAppend(svg, "<text x=\"", Num(left), "\" y=\"", Num(y + 18),
                  "\" font-size=\"13\" font-weight=\"bold\">", Escape(panel.title), "</text>\n");

  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
  double y_min = x_min, y_max = -x_min;
  for (const Line& line : lines) {
    for (const auto& [step, value] : line.points) {
      x_min = std::min(x_min, step);
      x_max = std::max(x_max, step);
      y_min = std::min(y_min, value);
      y_max = std::max(y_max, value);
    }
  }
  if (!(x_min <= x_max)) {
    absl::StrAppend(svg, "<text x=\"", Num((left + right) / 2), "\" y=\"", Num((top + bottom) / 2),
                    "\" text-anchor=\"middle\" fill=\"#667085\">", Escape(panel.empty),
                    "</text>\n</g>\n");
    return height;
  }
  const PlotAxis x_axis = NiceAxis(x_min, x_max, 5, true);
  const PlotAxis y_axis = NiceAxis(y_min, y_max, 4, false);
  auto px = [&](double v) {
    return left + (v - x_axis.lo) / (x_axis.hi - x_axis.lo) * (right - left);
  };
  auto py = [&](double v) {
    return bottom - (v - y_axis.lo) / (y_axis.hi - y_axis.lo) * (bottom - top);
  };

  for (double tick : y_axis.ticks) {
    absl::StrAppend(svg, "<line x1=\"", Num(left), "\" x2=\"", Num(right), "\" y1=\"",
                    Num(py(tick)), "\" y2=\"", Num(py(tick)), "\" stroke=\"#edf0f3\"/>\n");
    absl::StrAppend(svg, "<text class=\"tick\" x=\"", Num(left - 6), "\" y=\"", Num(py(tick) + 4),
                    "\" text-anchor=\"end\" fill=\"#667085\">", FormatTick(tick, y_axis.step),
                    "</text>\n");
  }
  for (double tick : x_axis.ticks) {
    absl::StrAppend(svg, "<line x1=\"", Num(px(tick)), "\" x2=\"", Num(px(tick)), "\" y1=\"",
                    Num(bottom), "\" y2=\"", Num(bottom + 4), "\" stroke=\"#98a2b3\"/>\n");
    absl::StrAppend(svg, "<text class=\"tick\" x=\"", Num(px(tick)), "\" y=\"", Num(bottom + 16),
                    "\" text-anchor=\"middle\" fill=\"#667085\">", FormatTick(tick, x_axis.step),
                    "</text>\n");
  }
  absl::StrAppend(svg, "<path d=\"M", Num(left), " ", Num(top), "V", Num(bottom), "H", Num(right),
                  "\" fill=\"none\" stroke=\"#98a2b3\"/>\n");
  absl::StrAppend(svg, "<text class=\"axis-label\" x=\"", Num((left + right) / 2), "\" y=\"",
                  Num(bottom + 31), "\" text-anchor=\"middle\" fill=\"#667085\">step</text>\n");

  for (const Line& line : lines) {
    if (line.points.empty()) continue;
    std::vector<std::string> points;
    points.reserve(line.points.size());
    for (const auto& [step, value] : line.points) {
      points.push_back(absl::StrCat(Num(px(step)), ",", Num(py(value))));
    }
    absl::StrAppend(svg, "<polyline class=\"series\" data-panel=\"", panel.id, "\" data-rank=\"",
                    line.rank, "\" data-series=\"", line.series->id, "\" data-points=\"",
                    line.points.size(), "\" fill=\"none\" stroke=\"", RankColor(line.rank),
                    "\" stroke-width=\"", line.series->dashed ? "1.3" : "1.6", "\"",
                    line.series->dashed ? " stroke-dasharray=\"5 3\"" : "", " points=\"",
                    absl::StrJoin(points, " "), "\"><title>rank ", line.rank, " ",
                    Escape(std::string(line.series->id) == "value" ? panel.title : line.series->id),
                    "</title></polyline>\n");
  }

  struct LegendItem {
    std::string label, color;
    bool dashed;
  };
  std::vector<LegendItem> legend;
  for (uint32_t rank : ranks)
    legend.push_back({absl::StrCat("rank ", rank), RankColor(rank), false});
  if (panel.series.size() > 1) {
    legend.push_back({"synced", "#444444", false});
    legend.push_back({"local", "#444444", true});
  }
  for (size_t i = 0; i < legend.size(); ++i) {
    const double lx = left + static_cast<double>(i % per_row) * kLegendItem;
    const double ly =
        y + kPlotBottom + kMarginBottom + static_cast<double>(i / per_row) * kLegendRow + 4;
    absl::StrAppend(svg, "<line class=\"legend-swatch\" x1=\"", Num(lx), "\" x2=\"", Num(lx + 18),
                    "\" y1=\"", Num(ly), "\" y2=\"", Num(ly), "\" stroke=\"", legend[i].color,
                    "\" stroke-width=\"2\"", legend[i].dashed ? " stroke-dasharray=\"5 3\"" : "",
                    "/>\n");
    absl::StrAppend(svg, "<text class=\"legend\" x=\"", Num(lx + 23), "\" y=\"", Num(ly + 4), "\">",
                    Escape(legend[i].label), "</text>\n");
  }
  absl::StrAppend(svg, "</g>\n");
  return height;
}

}  // namespace

std::vector<std::string> PlotPanelIds() {
  std::vector<std::string> ids;
  for (const Panel& panel : Panels()) ids.push_back(panel.id);
  return ids;
}

PlotAxis NiceAxis(double min, double max, int intervals, bool integer) {
  if (!(max > min)) {
    const double pad = min == 0 ? 1 : std::abs(min) * 0.1;
    if (min != 0) min -= pad;
    max += pad;
  }
  const double raw = (max - min) / intervals;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10) * magnitude;
  if (integer) step = std::max(1.0, std::round(step));
  PlotAxis axis;
  axis.step = step;
  axis.lo = std::floor(min / step) * step;
  axis.hi = std::ceil(max / step) * step;
  for (int i = 0; axis.lo + i * step <= axis.hi + step * 1e-9; ++i) {
    axis.ticks.push_back(axis.lo + i * step);
  }
  return axis;
}

std::string FormatTick(double value, double step) {
  if (value == 0 || std::abs(value) < step * 1e-9) return "0";
  const double a = std::abs(value);
  if (a >= 1e6 || a < 1e-3) {
    // "2.0e-5" as JavaScript's toExponential(1) without the '+' prints it.
    std::string text = absl::StrFormat("%.1e", value);
    const size_t e = text.find('e');
    std::string exponent = text.substr(e + 1);
    const bool negative = exponent[0] == '-';
    exponent = exponent.substr(1);
    exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
    return absl::StrCat(text.substr(0, e), "e", negative ? "-" : "", exponent);
  }
  // As many decimals as the step needs (2.5 needs one, 0.25 two).
  int decimals = 0;
  for (; decimals < 8; ++decimals) {
    const double scaled = step * std::pow(10, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
  }
  return absl::StrFormat("%.*f", decimals, value);
}

std::string MetricsSvg(const v1::GetJobMetricsResponse& metrics, const std::string& title) {
  std::vector<uint32_t> ranks;
  for (const v1::MetricsPoint& point : metrics.points()) ranks.push_back(point.rank());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  std::string body;
  const double width = kPageMargin * 2 + kColumns * kPanelWidth + (kColumns - 1) * kColumnGap;
  double y = kPageMargin + kTitleHeight;
  const std::vector<Panel>& panels = Panels();
  for (size_t first = 0; first < panels.size(); first += kColumns) {
    double row_height = 0;
    for (size_t i = first; i < std::min(panels.size(), first + kColumns); ++i) {
      const Panel& panel = panels[i];
      std::vector<Line> lines;
      for (uint32_t rank : ranks) {
        for (const Series& series : panel.series) {
          Line line{rank, &series, {}};
          for (const v1::MetricsPoint& point : metrics.points()) {
            const double value = series.value(point);
            if (point.rank() == rank && std::isfinite(value)) {
              line.points.emplace_back(static_cast<double>(point.step()), value);
            }
          }
          std::stable_sort(line.points.begin(), line.points.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
          lines.push_back(std::move(line));
        }
      }
      const double x = kPageMargin + static_cast<double>(i - first) * (kPanelWidth + kColumnGap);
      row_height = std::max(row_height, DrawPanel(panel, lines, ranks, x, y, &body));
    }
    y += row_height + kRowGap;
  }
  const double height = y - kRowGap + kPageMargin;

  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", Num(width), " ", Num(height),
      "\" width=\"", Num(width), "\" height=\"", Num(height),
      "\" font-family=\"DejaVu Sans, Liberation Sans, Arial, sans-serif\" font-size=\"11\" "
      "fill=\"#1d2330\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"#f5f6f8\"/>\n", "<text class=\"title\" x=\"",
      Num(kPageMargin), "\" y=\"", Num(kPageMargin + 20),
      "\" font-size=\"16\" font-weight=\"bold\">", Escape(title), "</text>\n");
  absl::StrAppend(&svg, body, "</svg>\n");
  return svg;
}

}  // namespace ringleader
