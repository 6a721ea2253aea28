// MetricsSvg read back as XML: a small tokenizer checks the tags nest and collects every element
// with its attributes; then the polylines (one per rank and panel, two in the grad norm panel),
// their point counts, that every coordinate lies inside the viewBox and the panel's plot area,
// the scale's direction, the legend and the ticks. NiceAxis and FormatTick on their own.
#include "client/plot_svg.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // the character data directly inside it
  std::vector<std::string> ancestors;
};

// Every element of `xml` in document order; fails the test when tags do not nest or an
// attribute is malformed. Enough XML for what MetricsSvg writes (no CDATA, no comments).
std::vector<Element> ParseXml(const std::string& xml) {
  std::vector<Element> elements;
  std::vector<size_t> open;  // indices into `elements`
  size_t i = 0;
  if (xml.compare(0, 5, "<?xml") == 0) i = xml.find("?>") + 2;
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    if (lt == std::string::npos) break;
    if (!open.empty()) elements[open.back()].text += xml.substr(i, lt - i);
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) {
      ADD_FAILURE() << "unclosed tag at " << lt;
      break;
    }
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || elements[open.back()].name != name) {
        ADD_FAILURE() << "</" << name << "> closes "
                      << (open.empty() ? "nothing" : elements[open.back()].name);
        return elements;
      }
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    Element element;
    const size_t space = tag.find_first_of(" \n");
    element.name = tag.substr(0, space);
    for (size_t index : open) element.ancestors.push_back(elements[index].name);
    size_t p = space == std::string::npos ? tag.size() : space;
    while (p < tag.size()) {
      while (p < tag.size() && (tag[p] == ' ' || tag[p] == '\n')) ++p;
      if (p >= tag.size()) break;
      const size_t eq = tag.find("=\"", p);
      const size_t end = eq == std::string::npos ? eq : tag.find('"', eq + 2);
      if (end == std::string::npos) {
        ADD_FAILURE() << "bad attribute in <" << tag << ">";
        return elements;
      }
      const std::string key = tag.substr(p, eq - p);
      EXPECT_EQ(element.attributes.count(key), 0u) << key << " twice in <" << tag << ">";
      element.attributes[key] = tag.substr(eq + 2, end - eq - 2);
      p = end + 1;
    }
    elements.push_back(std::move(element));
    if (!self_closing) open.push_back(elements.size() - 1);
  }
  EXPECT_TRUE(open.empty()) << open.size() << " elements left open";
  return elements;
}

std::vector<double> Numbers(const std::string& text) {
  std::vector<double> numbers;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(part, &value)) << part;
    numbers.push_back(value);
  }
  return numbers;
}

// `ranks` ranks x `steps` steps; drift measured every 5th step; loss falls as 3/step; rank 2's
// loss is NaN at step 7.
v1::GetJobMetricsResponse Metrics(uint32_t ranks, uint64_t steps) {
  v1::GetJobMetricsResponse metrics;
  metrics.set_job_id("job-000004");
  metrics.set_generation(2);
  for (uint64_t step = 1; step <= steps; ++step) {
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      v1::MetricsPoint* point = metrics.add_points();
      point->set_step(step);
      point->set_rank(rank);
      point->set_loss(rank == 2 && step == 7 ? std::nan("") : 3.0 / static_cast<double>(step));
      point->set_local_grad_norm(1.0 + 0.1 * rank + 0.01 * static_cast<double>(step));
      point->set_synced_grad_norm(1.05);
      point->set_has_drift(step % 5 == 0);
      point->set_drift(step % 5 == 0 ? 1e-7 * static_cast<double>(rank) : 0);
      point->set_step_ms(10 + rank);
      point->set_samples_per_second(6400.0 / (10 + rank));
    }
  }
  return metrics;
}

std::vector<const Element*> Named(const std::vector<Element>& elements, const std::string& name) {
  std::vector<const Element*> found;
  for (const Element& element : elements) {
    if (element.name == name) found.push_back(&element);
  }
  return found;
}

TEST(MetricsSvgTest, OnePolylinePerRankAndPanelWithEveryPointInsideItsPlotArea) {
  constexpr uint32_t kRanks = 3;
  constexpr uint64_t kSteps = 10;
  const std::string svg = MetricsSvg(Metrics(kRanks, kSteps), "job-000004");
  const std::vector<Element> elements = ParseXml(svg);
  ASSERT_FALSE(elements.empty());
  ASSERT_EQ(elements[0].name, "svg");
  EXPECT_EQ(elements[0].attributes.at("xmlns"), "http://www.w3.org/2000/svg");
  const std::vector<double> view_box = Numbers(elements[0].attributes.at("viewBox"));
  ASSERT_EQ(view_box.size(), 4u);
  EXPECT_EQ(view_box[0], 0);
  EXPECT_EQ(view_box[1], 0);

  // Plot areas of the panels, by panel id.
  std::map<std::string, std::vector<double>> areas;
  for (const Element* g : Named(elements, "g")) {
    areas[g->attributes.at("data-panel")] = Numbers(g->attributes.at("data-plot-area"));
  }
  ASSERT_EQ(areas.size(), PlotPanelIds().size());

  const std::vector<const Element*> polylines = Named(elements, "polyline");
  // Ranks x panels, plus the grad norm panel's second (local) line per rank.
  EXPECT_EQ(polylines.size(), kRanks * PlotPanelIds().size() + kRanks);
  std::map<std::string, int> per_panel;
  for (const Element* line : polylines) {
    const std::string panel = line->attributes.at("data-panel");
    const std::string series = line->attributes.at("data-series");
    uint32_t rank = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line->attributes.at("data-rank"), &rank));
    ++per_panel[panel];
    EXPECT_THAT(line->ancestors, ElementsAre("svg", "g")) << "inside its panel's group";

    size_t expected_points = kSteps;
    if (panel == "drift") expected_points = kSteps / 5;              // steps 5 and 10
    if (panel == "loss" && rank == 2) expected_points = kSteps - 1;  // the NaN is left out
    const std::vector<double> xy = Numbers(line->attributes.at("points"));
    ASSERT_EQ(xy.size() % 2, 0u);
    EXPECT_EQ(xy.size() / 2, expected_points) << panel << " rank " << rank << " " << series;
    EXPECT_EQ(line->attributes.at("data-points"), absl::StrCat(xy.size() / 2));

    const std::vector<double>& area = areas.at(panel);
    for (size_t k = 0; k + 1 < xy.size(); k += 2) {
      EXPECT_GE(xy[k], view_box[0]);
      EXPECT_LE(xy[k], view_box[0] + view_box[2]);
      EXPECT_GE(xy[k + 1], view_box[1]);
      EXPECT_LE(xy[k + 1], view_box[1] + view_box[3]);
      EXPECT_GE(xy[k], area[0]) << panel;
      EXPECT_LE(xy[k], area[2]) << panel;
      EXPECT_GE(xy[k + 1], area[1]) << panel;
      EXPECT_LE(xy[k + 1], area[3]) << panel;
      if (k >= 2) {
        EXPECT_GT(xy[k], xy[k - 2]) << "steps go left to right in " << panel;
      }
    }
    if (panel == "loss") {
      // 3/step falls: its last point is lower on the page (larger y) than its first.
      EXPECT_GT(xy.back(), xy[1] + 50);
    }
    EXPECT_EQ(line->attributes.count("stroke-dasharray"), series == "local" ? 1u : 0u);
  }
  EXPECT_EQ(per_panel["loss"], 3);
  EXPECT_EQ(per_panel["grad_norm"], 6);
  EXPECT_EQ(per_panel["drift"], 3);
  EXPECT_EQ(per_panel["step_ms"], 3);
  EXPECT_EQ(per_panel["samples_per_second"], 3);

  // A legend entry per rank in every panel, and the line styles in the grad norm panel.
  std::map<std::string, int> legend;
  int ticks = 0;
  for (const Element* text : Named(elements, "text")) {
    const auto cls = text->attributes.find("class");
    if (cls == text->attributes.end()) continue;
    if (cls->second == "legend") ++legend[text->text];
    if (cls->second == "tick") ++ticks;
  }
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(legend[absl::StrCat("rank ", rank)], 5) << rank;
  }
  EXPECT_EQ(legend["synced"], 1);
  EXPECT_EQ(legend["local"], 1);
  EXPECT_GE(ticks, 5 * 4) << "an x and a y axis with ticks in every panel";
}

TEST(MetricsSvgTest, TheTitleIsEscapedAndEveryPanelIsTitled) {
  const std::string svg = MetricsSvg(Metrics(1, 3), "job <a> & \"b\"");
  const std::vector<Element> elements = ParseXml(svg);
  EXPECT_THAT(svg, HasSubstr("job &lt;a&gt; &amp; &quot;b&quot;"));
  std::vector<std::string> texts;
  for (const Element* text : Named(elements, "text")) texts.push_back(text->text);
  for (const char* title :
       {"loss", "grad norm: synced (solid) vs local (dashed)", "step time (ms)", "samples/s"}) {
    EXPECT_THAT(texts, ::testing::Contains(title));
  }
}

TEST(MetricsSvgTest, NoPointsDrawsEmptyPanelsThatSaySo) {
  v1::GetJobMetricsResponse metrics;
  metrics.set_job_id("job-000001");
  const std::string svg = MetricsSvg(metrics, "job-000001");
  const std::vector<Element> elements = ParseXml(svg);
  EXPECT_TRUE(Named(elements, "polyline").empty());
  EXPECT_EQ(Named(elements, "g").size(), PlotPanelIds().size());
  EXPECT_THAT(svg, HasSubstr("no step reported yet"));
  EXPECT_THAT(svg, HasSubstr("no drift measured yet"));
}

TEST(MetricsSvgTest, ASingleStepStillLiesInsideThePlotArea) {
  const std::vector<Element> elements = ParseXml(MetricsSvg(Metrics(2, 1), "one step"));
  std::map<std::string, std::vector<double>> areas;
  for (const Element* g : Named(elements, "g")) {
    areas[g->attributes.at("data-panel")] = Numbers(g->attributes.at("data-plot-area"));
  }
  const std::vector<const Element*> polylines = Named(elements, "polyline");
  EXPECT_EQ(polylines.size(), 2u * 5u);  // no drift at step 1: 2 x (loss, 2 grad norms, 2 times)
  for (const Element* line : polylines) {
    const std::vector<double> xy = Numbers(line->attributes.at("points"));
    ASSERT_EQ(xy.size(), 2u);
    const std::vector<double>& area = areas.at(line->attributes.at("data-panel"));
    EXPECT_TRUE(xy[0] >= area[0] && xy[0] <= area[2] && xy[1] >= area[1] && xy[1] <= area[3])
        << line->attributes.at("points");
  }
}

TEST(NiceAxisTest, TicksAreNiceAndCoverTheData) {
  const PlotAxis axis = NiceAxis(0.23, 2.91, 4, false);
  EXPECT_EQ(axis.step, 1);
  EXPECT_EQ(axis.lo, 0);
  EXPECT_EQ(axis.hi, 3);
  EXPECT_THAT(axis.ticks, ElementsAre(0, 1, 2, 3));

  const PlotAxis steps = NiceAxis(1, 16, 5, true);
  EXPECT_EQ(steps.step, 5);
  EXPECT_THAT(steps.ticks, ElementsAre(0, 5, 10, 15, 20));

  const PlotAxis small = NiceAxis(1e-7, 4e-7, 4, false);
  EXPECT_DOUBLE_EQ(small.step, 1e-7);
  EXPECT_LE(small.lo, 1e-7);
  EXPECT_GE(small.hi, 4e-7);

  const PlotAxis zero = NiceAxis(0, 0, 4, false);  // all-zero drift
  EXPECT_EQ(zero.lo, 0);
  EXPECT_EQ(zero.hi, 1);
  const PlotAxis flat = NiceAxis(100, 100, 4, false);
  EXPECT_LT(flat.lo, 100);
  EXPECT_GT(flat.hi, 100);
  const PlotAxis one_step = NiceAxis(7, 7, 5, true);
  EXPECT_GE(one_step.step, 1);
  EXPECT_LT(one_step.lo, 7);
  EXPECT_GT(one_step.hi, 7);
}

TEST(FormatTickTest, FixedDecimalsOrExponents) {
  EXPECT_EQ(FormatTick(0, 1), "0");
  EXPECT_EQ(FormatTick(5.551115123125783e-17, 0.1), "0");  // 0 off by a rounding
  EXPECT_EQ(FormatTick(15, 5), "15");
  EXPECT_EQ(FormatTick(0.25, 0.05), "0.25");
  EXPECT_EQ(FormatTick(1.5, 0.5), "1.5");
  EXPECT_EQ(FormatTick(7.5, 2.5), "7.5");
  EXPECT_EQ(FormatTick(5, 2.5), "5.0");
  EXPECT_EQ(FormatTick(0.3, 0.1), "0.3");
  EXPECT_EQ(FormatTick(2e-5, 1e-5), "2.0e-5");
  EXPECT_EQ(FormatTick(-3e-4, 1e-4), "-3.0e-4");
  EXPECT_EQ(FormatTick(1.5e6, 5e5), "1.5e6");
}

}  // namespace
}  // namespace ringleader
