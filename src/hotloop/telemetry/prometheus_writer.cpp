#include "hotloop/telemetry/prometheus_writer.h"

#include <fmt/format.h>

namespace hotloop::telemetry {

PrometheusWriter& PrometheusWriter::family(
    std::string_view name,
    std::string_view type,
    std::string_view help) {
  family_ = prefix_ + std::string(name);
  out_ += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", family_, help, type);
  return *this;
}

PrometheusWriter& PrometheusWriter::sample(double value) {
  out_ += fmt::format("{} {}\n", family_, value);
  return *this;
}

PrometheusWriter& PrometheusWriter::sample(Labels labels, double value) {
  std::string text;
  for (const auto& [key, label] : labels) {
    text +=
        fmt::format("{}{}=\"{}\"", text.empty() ? "" : ",", key, escape(label));
  }
  out_ += fmt::format("{}{{{}}} {}\n", family_, text, value);
  return *this;
}

std::string PrometheusWriter::escape(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

} // namespace hotloop::telemetry
