#include "hotloop/train/run_report.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/atomic_file.h"
#include "hotloop/core/html_page.h"
#include "hotloop/core/svg_chart.h"
#include "hotloop/core/units.h"
#include "hotloop/errors.h"
#include "hotloop/train/run_folder.h"

namespace hotloop::train {

namespace {

using svg::escape;

nlohmann::json read_summary(const RunFolder& run) {
  std::ifstream in(run.summary());
  if (!in) {
    throw Error(
        fmt::format("report: no {}", run.summary()),
        "the run has not finished: its summary is written at the end");
  }
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    throw Error(fmt::format("report: {} is not JSON", run.summary()));
  }
  return j;
}

std::vector<nlohmann::json> read_metrics(const RunFolder& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run.metrics());
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) {
      lines.push_back(std::move(j));
    }
  }
  return lines;
}

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string row(const std::string& name, const std::string& value) {
  return fmt::format(
      "<tr><th>{}</th><td>{}</td></tr>\n", escape(name), escape(value));
}

std::string findings_table(const nlohmann::json& diagnosis) {
  std::string out =
      "<table><tr><th>verdict</th><th>evidence</th><th>fix</th></tr>\n";
  for (const auto& f : diagnosis.value("findings", nlohmann::json::array())) {
    out += fmt::format(
        "<tr><td><b>{}</b></td><td>{}</td><td>{}</td></tr>\n",
        escape(f.value("verdict", "")),
        escape(f.value("evidence", "")),
        escape(f.value("fix", "")));
  }
  return out + "</table>\n";
}

std::string charts(const std::vector<nlohmann::json>& metrics) {
  svg::Series step_ms{"step time", {}};
  svg::Series wait_ms{"data wait", {}};
  svg::Series loss{"loss", {}};
  svg::Series rate{"samples/s", {}};
  for (const auto& m : metrics) {
    if (!m.contains("step_time_ms")) {
      continue;
    }
    const double step = number(m, "step");
    step_ms.second.emplace_back(step, number(m, "step_time_ms"));
    wait_ms.second.emplace_back(step, number(m, "data_wait_ms"));
    rate.second.emplace_back(step, number(m, "images_per_s"));
    if (m.contains("loss") && m["loss"].is_number()) {
      loss.second.emplace_back(step, m["loss"].get<double>());
    }
  }
  if (step_ms.second.empty()) {
    return "<p>No steps in metrics.jsonl.</p>\n";
  }
  std::string out = svg::line_chart(
      "Step time and the data wait inside it",
      "step",
      "ms",
      {step_ms, wait_ms});
  out += svg::line_chart("Throughput", "step", "samples/s", {rate});
  if (!loss.second.empty()) {
    out += svg::line_chart("Training loss", "step", "loss", {loss});
  }
  return out;
}

std::string windows_table(const std::vector<nlohmann::json>& metrics) {
  std::string rows;
  for (const auto& m : metrics) {
    if (!m.contains("diagnosis")) {
      continue;
    }
    const auto& d = m["diagnosis"];
    const auto findings = d.value("findings", nlohmann::json::array());
    const nlohmann::json first =
        findings.empty() ? nlohmann::json::object() : findings.front();
    rows += fmt::format(
        "<tr><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td></tr>\n",
        m.value("step", std::int64_t{0}),
        escape(d.value("verdict", "")),
        escape(first.value("evidence", "")),
        escape(first.value("fix", "")));
  }
  if (rows.empty()) {
    return "<p>No whole diagnosis window (telemetry's diagnosis_window steps) in this run: the diagnosis above is of its last steps.</p>\n";
  }
  return "<table><tr><th>window ends at step</th><th>verdict</th><th>evidence</th><th>fix</th></tr>\n" +
      rows + "</table>\n";
}

} // namespace

std::string run_report_html(const std::string& run_dir) {
  const std::filesystem::path dir(run_dir);
  const RunFolder run(run_dir);
  const nlohmann::json s = read_summary(run);
  const std::vector<nlohmann::json> metrics = read_metrics(run);
  const nlohmann::json telemetry =
      s.value("telemetry", nlohmann::json::object());

  std::string facts;
  facts += row("steps", fmt::format("{}", s.value("steps", std::int64_t{0})));
  facts += row("wall time", fmt::format("{:.1f} s", number(s, "wall_s")));
  facts += row(
      "device, precision",
      fmt::format("{}, {}", s.value("device", ""), s.value("precision", "")));
  facts +=
      row("samples/s (steady state)",
          fmt::format("{:.1f}", number(s, "images_per_s")));
  if (number(s, "tokens_per_s") > 0) {
    facts += row("tokens/s", fmt::format("{:.0f}", number(s, "tokens_per_s")));
  }
  const auto step_time = s.value("step_time_ms", nlohmann::json::object());
  facts +=
      row("step time (median / p90)",
          fmt::format(
              "{:.2f} / {:.2f} ms ({} clock)",
              number(step_time, "median"),
              number(step_time, "p90"),
              step_time.value("clock", "host")));
  facts += row(
      "data wait",
      fmt::format(
          "{:.1f}% of the step time", 100 * number(s, "data_wait_fraction")));
  if (s.contains("mfu") && s["mfu"].is_number()) {
    facts +=
        row("MFU",
            fmt::format(
                "{:.1f}% of {}",
                100 * s["mfu"].get<double>(),
                s.value("mfu_peak", "")));
  }
  if (s.contains("train_loss") && number(s, "train_loss") != 0) {
    facts +=
        row("training loss (last steps' mean)",
            fmt::format("{:.4f}", number(s, "train_loss")));
  }
  const auto memory = s.value("peak_memory_bytes", nlohmann::json::object());
  if (number(memory, "reserved") > 0) {
    facts +=
        row("peak GPU memory (allocated / reserved)",
            fmt::format(
                "{} / {}",
                format_bytes(memory.value("allocated", std::uint64_t{0})),
                format_bytes(memory.value("reserved", std::uint64_t{0}))));
  }
  facts +=
      row("peak host memory (RSS)",
          format_bytes(memory.value("rss", std::uint64_t{0})));
  facts +=
      row("bad samples skipped",
          fmt::format("{}", s.value("bad_samples", std::size_t{0})));
  if (telemetry.value("enabled", false)) {
    facts +=
        row("telemetry's cost",
            fmt::format(
                "{:.2f}% of the wall time ({} samples; NVML: {})",
                100 * number(telemetry, "overhead"),
                telemetry.value("samples", std::size_t{0}),
                telemetry.value("nvml", "")));
  }

  std::string verdict =
      "<p>No diagnosis: telemetry was off, or the run was shorter than a window.</p>\n";
  if (telemetry.contains("diagnosis")) {
    verdict = fmt::format(
                  "<p>Verdict of the last window: <b>{}</b></p>\n",
                  escape(telemetry["diagnosis"].value("verdict", ""))) +
        findings_table(telemetry["diagnosis"]);
  }
  const std::string body = fmt::format(
      "<h1>hotloop run</h1>\n<p>{}</p>\n"
      "<h2>Diagnosis</h2>\n{}<h2>Figures</h2>\n<table>\n{}</table>\n"
      "<h2>Steps</h2>\n{}<h2>Diagnosis windows</h2>\n{}"
      "<p>Every step is in metrics.jsonl, every sample in telemetry.jsonl; summary.json has these figures; "
      "TensorBoard's event files beside them have the timelines.</p>\n",
      escape(std::filesystem::absolute(dir).string()),
      verdict,
      facts,
      charts(metrics),
      windows_table(metrics));
  return html::page("hotloop run " + dir.filename().string(), body);
}

void write_run_report(const std::string& run_dir) {
  write_text_atomic(RunFolder(run_dir).report(), run_report_html(run_dir));
}

} // namespace hotloop::train
