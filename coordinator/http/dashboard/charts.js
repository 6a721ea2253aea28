// Line charts as SVG, in plain JavaScript (no library): one panel per quantity, one polyline per
// rank (and series), axes with ticks and labels, a legend. Used by dashboard.js; the CLI's
// `ringleader plot` draws the same panels in C++ (client/plot_svg.cc).
//
//   RL.lineChart({panel, title, xLabel, series: [{rank, series, label, color, dashed,
//                                                 points: [[x, y], ...]}], legend})
//     → an <svg> element (viewBox 0 0 WIDTH HEIGHT, HEIGHT grows with the legend's rows).
//
// Every polyline carries data-panel, data-rank and data-series so tests and scripts can find
// it; points that are not finite numbers are left out.
"use strict";

var RL = window.RL || {};
window.RL = RL;

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var WIDTH = 480;
  var PLOT_HEIGHT = 200;  // top margin + plot + x axis
  var MARGIN = {left: 58, right: 24, top: 30, bottom: 36};
  var LEGEND_ROW = 18;
  var LEGEND_ITEM = 92;

  // Ten distinguishable colours, one per rank (ranks past ten reuse them).
  RL.COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
               "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  RL.rankColor = function (rank) { return RL.COLORS[rank % RL.COLORS.length]; };

  function el(name, attributes, text) {
    var node = document.createElementNS(SVG, name);
    for (var key in attributes) node.setAttribute(key, attributes[key]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // A "nice" tick spacing (1, 2, 2.5 or 5 × 10^k) giving about `count` intervals over `range`.
  function niceStep(range, count) {
    var raw = range / count;
    var magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    var r = raw / magnitude;
    var nice = r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10;
    return nice * magnitude;
  }

  // The axis range [lo, hi] rounded out to ticks, and the ticks. `integer`: steps of at least 1.
  RL.axis = function (min, max, count, integer) {
    if (!(max > min)) {
      var pad = min === 0 ? 1 : Math.abs(min) * 0.1;
      min = min - (min === 0 ? 0 : pad);
      max = max + pad;
    }
    var step = niceStep(max - min, count);
    if (integer) step = Math.max(1, Math.round(step));
    var lo = Math.floor(min / step) * step;
    var hi = Math.ceil(max / step) * step;
    var ticks = [];
    for (var i = 0; lo + i * step <= hi + step * 1e-9; i++) ticks.push(lo + i * step);
    return {lo: lo, hi: hi, step: step, ticks: ticks};
  };

  // Tick label: fixed decimals for ordinary magnitudes, exponent form for tiny or huge ones.
  RL.formatTick = function (value, step) {
    if (value === 0 || Math.abs(value) < step * 1e-9) return "0";  // 0 off by a rounding
    var a = Math.abs(value);
    if (a >= 1e6 || a < 1e-3) return value.toExponential(1).replace("e+", "e");
    // As many decimals as the step needs (2.5 needs one, 0.25 two).
    var decimals = 0;
    for (; decimals < 8; decimals++) {
      var scaled = step * Math.pow(10, decimals);
      if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * scaled) break;
    }
    return value.toFixed(decimals);
  };

  RL.lineChart = function (spec) {
    var xs = [], ys = [];
    spec.series.forEach(function (s) {
      s.points = s.points.filter(function (p) { return isFinite(p[0]) && isFinite(p[1]); });
      s.points.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); });
    });
    var legend = spec.legend || [];
    var rows = Math.ceil(legend.length / Math.floor((WIDTH - MARGIN.left) / LEGEND_ITEM));
    var height = PLOT_HEIGHT + MARGIN.bottom + rows * LEGEND_ROW;
    var svg = el("svg", {viewBox: "0 0 " + WIDTH + " " + height, "class": "chart",
                         "data-panel": spec.panel, role: "img"});
    svg.appendChild(el("title", {}, spec.title));
    svg.appendChild(el("text", {x: MARGIN.left, y: 18, "class": "chart-title"}, spec.title));

    var left = MARGIN.left, right = WIDTH - MARGIN.right;
    var top = MARGIN.top, bottom = PLOT_HEIGHT;
    if (xs.length === 0) {
      svg.appendChild(el("text", {x: (left + right) / 2, y: (top + bottom) / 2,
                                  "class": "chart-empty", "text-anchor": "middle"},
                         spec.empty || "no data yet"));
      return svg;
    }
    var xAxis = RL.axis(Math.min.apply(null, xs), Math.max.apply(null, xs), 5, true);
    var yAxis = RL.axis(Math.min.apply(null, ys), Math.max.apply(null, ys), 4, false);
    function px(x) { return left + (x - xAxis.lo) / (xAxis.hi - xAxis.lo) * (right - left); }
    function py(y) { return bottom - (y - yAxis.lo) / (yAxis.hi - yAxis.lo) * (bottom - top); }

    var grid = el("g", {"class": "grid"});
    yAxis.ticks.forEach(function (t) {
      var y = py(t).toFixed(1);
      grid.appendChild(el("line", {x1: left, x2: right, y1: y, y2: y}));
      grid.appendChild(el("text", {x: left - 6, y: (py(t) + 4).toFixed(1), "text-anchor": "end",
                                   "class": "tick"}, RL.formatTick(t, yAxis.step)));
    });
    xAxis.ticks.forEach(function (t) {
      grid.appendChild(el("line", {x1: px(t).toFixed(1), x2: px(t).toFixed(1), y1: bottom,
                                   y2: bottom + 4, "class": "tick-mark"}));
      grid.appendChild(el("text", {x: px(t).toFixed(1), y: bottom + 16, "text-anchor": "middle",
                                   "class": "tick"}, RL.formatTick(t, xAxis.step)));
    });
    svg.appendChild(grid);
    svg.appendChild(el("path", {d: "M" + left + " " + top + "V" + bottom + "H" + right,
                                "class": "axis", fill: "none"}));
    svg.appendChild(el("text", {x: (left + right) / 2, y: bottom + 31, "text-anchor": "middle",
                                "class": "axis-label"}, spec.xLabel || "step"));

    spec.series.forEach(function (s) {
      if (s.points.length === 0) return;
      var points = s.points.map(function (p) {
        return px(p[0]).toFixed(1) + "," + py(p[1]).toFixed(1);
      }).join(" ");
      var line = el("polyline", {points: points, fill: "none", stroke: s.color,
                                 "stroke-width": s.dashed ? 1.3 : 1.6,
                                 "data-panel": spec.panel, "data-rank": s.rank,
                                 "data-series": s.series, "data-points": s.points.length,
                                 "class": "series"});
      if (s.dashed) line.setAttribute("stroke-dasharray", "5 3");
      line.appendChild(el("title", {}, s.label));
      svg.appendChild(line);
    });

    var perRow = Math.floor((WIDTH - MARGIN.left) / LEGEND_ITEM);
    legend.forEach(function (item, i) {
      var x = MARGIN.left + (i % perRow) * LEGEND_ITEM;
      var y = PLOT_HEIGHT + MARGIN.bottom + Math.floor(i / perRow) * LEGEND_ROW + 4;
      var g = el("g", {"class": "legend-item"});
      var swatch = el("line", {x1: x, x2: x + 18, y1: y, y2: y, stroke: item.color,
                               "stroke-width": 2});
      if (item.dashed) swatch.setAttribute("stroke-dasharray", "5 3");
      g.appendChild(swatch);
      g.appendChild(el("text", {x: x + 23, y: y + 4, "class": "legend"}, item.label));
      svg.appendChild(g);
    });
    return svg;
  };
})();
