#include "hotloop/core/svg_chart.h"

#include <algorithm>

#include <fmt/format.h>

namespace hotloop::svg {

namespace {

const char* kColors[] = {
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac"};

} // namespace

std::string escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
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

const char* color(std::size_t i) {
  return kColors[i % (sizeof kColors / sizeof kColors[0])];
}

std::string line_chart(
    const std::string& title,
    const std::string& x_label,
    const std::string& y_label,
    const std::vector<
        std::pair<std::string, std::vector<std::pair<double, double>>>>& series,
    double y_max) {
  const int w = 700, h = 300, l = 60, r = 170, t = 30, b = 40;
  double xmax = 0, ymax = 0;
  for (const auto& [name, pts] : series) {
    for (const auto& [x, y] : pts) {
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  }
  xmax = xmax > 0 ? xmax : 1;
  ymax = y_max > 0 ? y_max : (ymax > 0 ? ymax * 1.05 : 1);
  const double pw = w - l - r, ph = h - t - b;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\"><title>{}</title>"
      "<text x=\"0\" y=\"16\" font-weight=\"bold\">{}</text>"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>"
      "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>"
      "<text x=\"12\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>"
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.3g}</text>"
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">0</text>"
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.3g}</text>",
      w,
      h,
      escape(title),
      escape(title),
      l,
      t,
      l,
      t + ph,
      l,
      t + ph,
      l + pw,
      t + ph,
      l + pw / 2,
      h - 8,
      escape(x_label),
      t + ph / 2,
      t + ph / 2,
      escape(y_label),
      l - 4,
      t + 10,
      ymax,
      l - 4,
      t + ph,
      l + pw,
      t + ph + 14,
      xmax);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [name, pts] = series[i];
    std::string poly;
    for (const auto& [x, y] : pts) {
      if (y < 0) {
        continue;
      }
      poly += fmt::format(
          "{:.1f},{:.1f} ", l + pw * x / xmax, t + ph - ph * y / ymax);
    }
    s += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>"
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>",
        color(i),
        poly,
        w - r + 10,
        t + 16 * static_cast<int>(i),
        color(i),
        w - r + 24,
        t + 9 + 16 * static_cast<int>(i),
        escape(name));
  }
  return s + "</svg>";
}

} // namespace hotloop::svg
