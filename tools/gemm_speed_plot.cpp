#include "gemm_speed_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "base/error.h"

namespace tilellm::cli {

using namespace tilellm::gemm;

namespace {

const char* svg_color(Mode m) {
  switch (m) {
    case Mode::kFloat:
      return "#1f77b4";
    case Mode::kInt8B0:
      return "#d62728";
    case Mode::kInt4B64:
      return "#2ca02c";
    case Mode::kInt4A8:
      return "#9467bd";
  }
  return "#000";
}

}  // namespace

void write_gemm_plot(const std::string& path, const std::vector<GemmRow>& rows,
                     const std::string& raw_title) {
  const bool html = path.size() >= 5 && path.compare(path.size() - 5, 5, ".html") == 0;
  std::string title;  // a device or CPU name may hold '&' or '<'
  for (char c : raw_title)
    title += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
  std::vector<std::pair<int, int>> shapes;
  std::set<int> mset;
  std::set<Mode> modes;
  double ymax = 1.0;
  for (const GemmRow& r : rows) {
    if (std::find(shapes.begin(), shapes.end(), std::make_pair(r.K, r.N)) == shapes.end()) {
      shapes.push_back({r.K, r.N});
    }
    mset.insert(r.M);
    modes.insert(r.mode);
    ymax = std::max(ymax, gflops(r.M, r.K, r.N, r.ms.mean));
    if (r.has_gpu && r.gpu.mean > 0) ymax = std::max(ymax, gflops(r.M, r.K, r.N, r.gpu.mean));
  }
  const std::vector<int> mv(mset.begin(), mset.end());
  const int pw = 300, ph = 240, ml = 50, mt = 50, gap = 30;
  const int W = ml + int(shapes.size()) * (pw + gap) + 20, H = mt + ph + 90;
  std::ofstream o(path);
  if (!o) fail("{}: cannot write the plot", path);
  if (html) {
    o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << title
      << "</title></head>\n<body style=\"font-family: sans-serif\">\n";
  }
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/>\n";
  o << "<text x=\"" << ml << "\" y=\"20\" font-size=\"14\">" << title << "</text>\n";
  const double ytop = std::ceil(ymax * 1.1 / 100.0) * 100.0;
  auto xpos = [&](int px, int M) {
    const size_t i = size_t(std::find(mv.begin(), mv.end(), M) - mv.begin());
    return px + (mv.size() > 1 ? double(i) * pw / double(mv.size() - 1) : pw / 2.0);
  };
  auto ypos = [&](double g) { return mt + ph - g / ytop * ph; };
  for (size_t s = 0; s < shapes.size(); ++s) {
    const int px = ml + int(s) * (pw + gap);
    o << "<rect x=\"" << px << "\" y=\"" << mt << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
    o << "<text x=\"" << px + pw / 2 << "\" y=\"" << mt - 6
      << "\" text-anchor=\"middle\">K=" << shapes[s].first << " N=" << shapes[s].second << "</text>\n";
    for (int g = 0; g <= 4; ++g) {
      const double v = ytop * g / 4;
      o << "<line x1=\"" << px << "\" x2=\"" << px + pw << "\" y1=\"" << ypos(v) << "\" y2=\"" << ypos(v)
        << "\" stroke=\"#eee\"/>\n";
      if (s == 0) {
        o << "<text x=\"" << px - 4 << "\" y=\"" << ypos(v) + 4 << "\" text-anchor=\"end\">" << int(v)
          << "</text>\n";
      }
    }
    for (int M : mv) {
      o << "<text x=\"" << xpos(px, M) << "\" y=\"" << mt + ph + 14 << "\" text-anchor=\"middle\">" << M
        << "</text>\n";
    }
    o << "<text x=\"" << px + pw / 2 << "\" y=\"" << mt + ph + 30 << "\" text-anchor=\"middle\">M</text>\n";
    for (Mode mode : modes) {
      std::string pts, gpts;
      for (const GemmRow& r : rows) {
        if (r.mode != mode || r.K != shapes[s].first || r.N != shapes[s].second) continue;
        const double x = xpos(px, r.M), y = ypos(gflops(r.M, r.K, r.N, r.ms.mean));
        pts += std::to_string(x) + "," + std::to_string(y) + " ";
        o << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"2.5\" fill=\"" << svg_color(mode) << "\"/>\n";
        if (r.has_gpu && r.gpu.mean > 0)
          gpts += std::to_string(x) + "," + std::to_string(ypos(gflops(r.M, r.K, r.N, r.gpu.mean))) + " ";
      }
      if (!pts.empty()) {
        o << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" << svg_color(mode) << "\" points=\""
          << pts << "\"/>\n";
      }
      if (!gpts.empty()) {
        o << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" stroke=\""
          << svg_color(mode) << "\" points=\"" << gpts << "\"/>\n";
      }
    }
  }
  o << "<text x=\"12\" y=\"" << mt + ph / 2 << "\" transform=\"rotate(-90 12 " << mt + ph / 2
    << ")\" text-anchor=\"middle\">GFLOPS (mean)</text>\n";
  int lx = ml;
  for (Mode mode : modes) {
    o << "<rect x=\"" << lx << "\" y=\"" << H - 30 << "\" width=\"12\" height=\"12\" fill=\""
      << svg_color(mode) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << H - 20 << "\">" << mode_tag(mode)
      << "</text>\n";
    lx += 120;
  }
  if (std::any_of(rows.begin(), rows.end(), [](const GemmRow& r) { return r.has_gpu; }))
    o << "<text x=\"" << lx << "\" y=\"" << H - 20
      << "\">solid: total (round trip); dashed: gpu time</text>\n";
  o << "</svg>\n";
  if (html) {
    o << "<table border=\"1\" cellpadding=\"3\" style=\"border-collapse: collapse; font-size: 12px\">\n"
      << "<tr><th>mode</th><th>M</th><th>K</th><th>N</th><th>mean ms</th><th>median ms</th><th>min ms</th>"
         "<th>GFLOPS (mean)</th>"
      << (std::any_of(rows.begin(), rows.end(), [](const GemmRow& r) { return r.has_gpu; })
              ? "<th>gpu mean ms</th><th>GFLOPS (gpu)</th>"
              : "")
      << "</tr>\n";
    for (const GemmRow& r : rows) {
      o << fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>"
          "<td>{:.2f}</td>",
          mode_tag(r.mode), r.M, r.K, r.N, r.ms.mean, r.ms.median, r.ms.min,
          gflops(r.M, r.K, r.N, r.ms.mean));
      if (r.has_gpu)
        o << fmt::format("<td>{:.3f}</td><td>{:.2f}</td>", r.gpu.mean, gflops(r.M, r.K, r.N, r.gpu.mean));
      o << "</tr>\n";
    }
    o << "</table>\n</body></html>\n";
  }
}

}  // namespace tilellm::cli
