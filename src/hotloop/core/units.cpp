#include "hotloop/core/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::uint64_t parse_bytes(const std::string& text, const std::string& what) {
  double value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  std::string unit(ptr, last);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) {
    return std::tolower(c);
  });
  struct Unit {
    const char* name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1e3},
      {"kb", 1e3},
      {"kib", 1024},
      {"m", 1e6},
      {"mb", 1e6},
      {"mib", 1048576.0},
      {"g", 1e9},
      {"gb", 1e9},
      {"gib", 1073741824.0},
      {"t", 1e12},
      {"tb", 1e12},
      {"tib", 1099511627776.0}};
  if (ec == std::errc() && ptr != first && value > 0 && std::isfinite(value)) {
    for (const auto& u : kUnits) {
      if (unit == u.name) {
        return static_cast<std::uint64_t>(std::llround(value * u.factor));
      }
    }
  }
  throw UsageError(
      fmt::format("{}: '{}' is not a size", what, text),
      "write e.g. 256MiB, 1GiB, 500MB or a number of bytes");
}

} // namespace hotloop
