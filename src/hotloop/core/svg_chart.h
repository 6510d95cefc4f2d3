#pragma once
// Charts as inline SVG for self-contained HTML reports (no script, no
// network): `hotloop bench`'s report and `hotloop watch`'s.

#include <string>
#include <utility>
#include <vector>

namespace hotloop::svg {

// Text made safe inside HTML and SVG.
std::string escape(const std::string& s);
// The i-th color of the report palette (Tableau 10), cycling.
const char* color(std::size_t i);

using Series = std::pair<std::string, std::vector<std::pair<double, double>>>;

// Lines over x: one polyline per series (points with y < 0 are left out),
// a legend on the right; y runs from 0 to `y_max` (0: the data's maximum).
std::string line_chart(
    const std::string& title,
    const std::string& x_label,
    const std::string& y_label,
    const std::vector<Series>& series,
    double y_max = 0);

} // namespace hotloop::svg
