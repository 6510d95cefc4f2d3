#pragma once
// The one writer of Prometheus's exposition text (format 0.0.4), for the
// training run's endpoint (prometheus.h) and watch's (watch_report.h): a
// family's HELP and TYPE lines, then its samples, each with its labels
// escaped. Only the names and values are the callers'.

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace hotloop::telemetry {

class PrometheusWriter {
 public:
  using Labels =
      std::initializer_list<std::pair<std::string_view, std::string_view>>;

  // Every family's name starts with `prefix` ("hotloop_", "hotloop_watch_").
  explicit PrometheusWriter(std::string prefix) : prefix_(std::move(prefix)) {}

  // A family's HELP and TYPE ("gauge" or "counter"); its samples follow.
  PrometheusWriter& family(
      std::string_view name,
      std::string_view type,
      std::string_view help);
  // A sample of the latest family, with labels or without.
  PrometheusWriter& sample(double value);
  PrometheusWriter& sample(Labels labels, double value);
  // A family with its one unlabelled sample.
  PrometheusWriter& gauge(
      std::string_view name,
      std::string_view help,
      double value) {
    return family(name, "gauge", help).sample(value);
  }
  PrometheusWriter& counter(
      std::string_view name,
      std::string_view help,
      double value) {
    return family(name, "counter", help).sample(value);
  }

  const std::string& text() const {
    return out_;
  }

  // A label's value as the format writes it: backslash, quote and line
  // break escaped.
  static std::string escape(std::string_view value);

 private:
  std::string prefix_;
  std::string family_; // the latest family's full name
  std::string out_;
};

} // namespace hotloop::telemetry
