#include "svg_plot.h"

#include <fmt/format.h>

#include <algorithm>

namespace tilellm::cli {

std::string html_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

double nice_step(double range, int ticks) {
  const double raw = range / ticks, mag = std::pow(10.0, std::floor(std::log10(raw))), n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

std::string num_label(double v, double step) {
  if (std::fabs(v) < step * 1e-6) v = 0;
  const int dec = step >= 1 ? 0 : int(std::ceil(-std::log10(step)));
  return fmt::format("{:.{}f}", v, std::min(dec, 6));
}

constexpr double kW = 920, kH = 240, kL = 66, kR = 18, kT = 30, kB = 38;

}  // namespace

std::string render_time_plot(const TimePlot& p, double x_max, const std::vector<TimeMark>& marks,
                             bool minutes) {
  double lo = INFINITY, hi = -INFINITY;
  for (const PlotSeries& s : p.series)
    for (double y : s.y)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  for (const PlotLine& h : p.lines) lo = std::min(lo, h.y), hi = std::max(hi, h.y);
  if (lo > 0 && lo < 0.35 * hi) lo = 0;
  if (hi - lo < 1e-9 * std::max(1.0, std::fabs(hi))) lo -= 1, hi += 1;
  const double pad = 0.06 * (hi - lo);
  hi += pad;
  if (lo != 0) lo -= pad;
  const double ystep = nice_step(hi - lo, 5);
  lo = std::floor(lo / ystep) * ystep;
  hi = std::ceil(hi / ystep) * ystep;
  x_max = std::max(x_max, 1e-3);
  const double xs = minutes ? 60.0 : 1.0, xstep = nice_step(x_max / xs, 8);
  auto X = [&](double x) { return kL + (kW - kL - kR) * x / x_max; };
  auto Y = [&](double y) { return kT + (kH - kT - kB) * (1.0 - (y - lo) / (hi - lo)); };

  std::string o = fmt::format(
      "<figure><svg class=\"plot\" id=\"{}\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\"><title>{}</title>\n",
      p.id, p.points(), kW, kH, kW, kH, html_escape(p.title));
  o += fmt::format("<text x=\"{}\" y=\"18\" class=\"t\">{} ({})</text>\n", kL, html_escape(p.title),
                   html_escape(p.unit));
  for (double y = lo; y <= hi + ystep * 1e-6; y += ystep) {
    o += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"g\"/>", kL,
                     kW - kR, Y(y), Y(y));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"yl\">{}</text>\n", kL - 6, Y(y) + 4,
                     num_label(y, ystep));
  }
  for (double x = 0; x <= x_max / xs + xstep * 1e-6; x += xstep) {
    o += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"g\"/>", X(x * xs),
                     X(x * xs), kT, kH - kB);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"xl\">{}</text>\n", X(x * xs), kH - kB + 15,
                     num_label(x, xstep));
  }
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"xl\">time since start ({})</text>\n",
                   (kL + kW - kR) / 2, kH - 4, minutes ? "min" : "s");
  // Labels of the horizontal lines spread along the axis, so that lines close together stay readable.
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const PlotLine& h = p.lines[i];
    const double lx = kW - kR - 4 - double(p.lines.size() - 1 - i) * 110.0;
    o += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" class=\"h\"/><text "
        "x=\"{:.1f}\" y=\"{:.1f}\" class=\"hl\" fill=\"{}\">{}</text>\n",
        kL, kW - kR, Y(h.y), Y(h.y), h.color, lx, Y(h.y) - 3, h.color, html_escape(h.label));
  }
  for (const TimeMark& m : marks) {
    o += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
        "class=\"{3}\"><title>{4}</title></line>\n",
        X(m.t), kT, kH - kB, m.up ? "du" : "dd", html_escape(m.title));
  }
  double legend_x = kL + 320;
  for (const PlotSeries& s : p.series) {
    std::string seg;
    auto flush = [&] {
      if (seg.empty()) return;
      o += fmt::format("<polyline class=\"{}\" stroke=\"{}\" points=\"{}\"/>\n", s.faint ? "sf" : "s",
                       s.color, seg);
      seg.clear();
    };
    double prev_y = NAN;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) {
        flush();
        prev_y = NAN;
        continue;
      }
      if (s.step && std::isfinite(prev_y)) seg += fmt::format("{:.1f},{:.1f} ", X(s.x[i]), Y(prev_y));
      seg += fmt::format("{:.1f},{:.1f} ", X(s.x[i]), Y(s.y[i]));
      prev_y = s.y[i];
    }
    flush();
    o += fmt::format(
        "<rect x=\"{:.0f}\" y=\"10\" width=\"14\" height=\"4\" fill=\"{}\"/><text x=\"{:.0f}\" "
        "y=\"17\" class=\"lg\">{}</text>\n",
        legend_x, s.color, legend_x + 18, html_escape(s.name));
    legend_x += 30 + 7.0 * double(s.name.size());
  }
  o += "</svg></figure>\n";
  return o;
}

}  // namespace tilellm::cli
