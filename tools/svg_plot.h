// Line plots over time as inline SVG, for tilellm monitor's report (monitor_report.h): a time axis in
// seconds (or minutes), a y axis with round ticks, series drawn as polylines (a NaN breaks a line), dashed
// horizontal reference lines, and vertical marks for events (the pacing controller's decisions), each
// with a tooltip. The SVG is written for inline use in an HTML page that styles its classes (the report's
// stylesheet); nothing in it refers to anything outside it.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm::cli {

// One line of a plot, x in seconds.
struct PlotSeries {
  std::string name, color;
  std::vector<double> x, y;
  bool step = false;   // drawn as a staircase (a level held until the next point)
  bool faint = false;  // thinner and lighter (e.g. a per-bin maximum beside its mean)
};
// A dashed horizontal line with its label (a percentile, a limit).
struct PlotLine {
  double y;
  std::string label, color;
};
struct TimePlot {
  std::string id, title, unit;
  std::vector<PlotSeries> series;
  std::vector<PlotLine> lines;
  // The finite points of every series: what the plot holds.
  size_t points() const {
    size_t n = 0;
    for (const PlotSeries& s : series)
      for (double y : s.y) n += std::isfinite(y);
    return n;
  }
};
// A vertical mark at time t (seconds): up (red) or down (green), with its tooltip.
struct TimeMark {
  double t;
  bool up;
  std::string title;
};

// The plot as <figure><svg class="plot" id=ID data-points=N ...>; x runs from 0 to x_max seconds.
std::string render_time_plot(const TimePlot& p, double x_max, const std::vector<TimeMark>& marks,
                             bool minutes);

// &, <, >, " as HTML entities.
std::string html_escape(std::string_view s);

}  // namespace tilellm::cli
