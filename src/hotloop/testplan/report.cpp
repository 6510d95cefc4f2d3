#include "hotloop/testplan/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "hotloop/core/atomic_file.h"
#include "hotloop/core/html_page.h"
#include "hotloop/core/svg_chart.h"
#include "hotloop/errors.h"
#include "hotloop/testplan/fingerprint.h"

namespace hotloop::testplan {

namespace fs = std::filesystem;

namespace {

using svg::color;
using svg::escape;
using svg::line_chart;

// A row's rate: images/s, or a language model's tokens/s (its own unit).
std::string rate_text(const RowResult& r) {
  return r.tokens_per_s > 0 ? fmt::format("{:.0f} tok/s", r.tokens_per_s)
                            : fmt::format("{:.0f}", r.images_per_s);
}

// Model FLOP/s in TFLOP/s, with the MFU where the GPU's peak is known.
std::string flops_text(const RowResult& r) {
  if (r.model_flops_per_s <= 0) {
    return "-";
  }
  return r.mfu
      ? fmt::format(
            "{:.2f} ({:.1f}%)", r.model_flops_per_s / 1e12, 100 * *r.mfu)
      : fmt::format("{:.3f}", r.model_flops_per_s / 1e12);
}

std::string row_name(const RowResult& r) {
  return fmt::format(
      "{} {}{} b{}",
      r.row.device,
      r.resolved_precision,
      r.row.model == "resnet18-small" ? "" : " " + r.row.model,
      r.row.batch);
}

std::string mib(std::uint64_t bytes) {
  return bytes == 0
      ? "-"
      : fmt::format("{:.0f}", static_cast<double>(bytes) / (1 << 20));
}

std::string range(
    const nlohmann::json& gpu,
    const char* lo,
    const char* hi,
    const char* unit) {
  if (!gpu.is_object() || gpu.value(hi, -1.0) < 0) {
    return "-";
  }
  return fmt::format(
      "{:.0f}-{:.0f}{}", gpu.value(lo, 0.0), gpu.value(hi, 0.0), unit);
}

// Horizontal bars: one per (label, value); value <= 0 draws the note.
std::string bar_chart(
    const std::string& title,
    const std::vector<std::pair<std::string, double>>& bars,
    const std::vector<std::string>& notes,
    const std::string& unit) {
  const int row_h = 22, label_w = 190, plot_w = 420, w = label_w + plot_w + 90;
  const int h = 30 + row_h * static_cast<int>(bars.size()) + 10;
  double max = 0;
  for (const auto& [l, v] : bars) {
    max = std::max(max, v);
  }
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\"><title>{}</title>"
      "<text x=\"0\" y=\"16\" font-weight=\"bold\">{}</text>",
      w,
      h,
      escape(title),
      escape(title));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const int y = 28 + row_h * static_cast<int>(i);
    const auto& [label, v] = bars[i];
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12\">{}</text>",
        label_w - 6,
        y + 14,
        escape(label));
    if (v > 0 && max > 0) {
      const double bw = plot_w * v / max;
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>"
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"12\">{:.1f} {}</text>",
          label_w,
          y + 2,
          bw,
          row_h - 6,
          color(i),
          label_w + bw + 4,
          y + 14,
          v,
          unit);
    } else {
      s += fmt::format(
          "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#888\">{}</text>",
          label_w + 4,
          y + 14,
          escape(i < notes.size() ? notes[i] : ""));
    }
  }
  return s + "</svg>";
}

// One stacked bar per row: the mean time of each step phase.
std::string phase_chart(const std::vector<RowResult>& rows) {
  const std::vector<std::string> phases = {
      "data_wait",
      "copy",
      "forward",
      "backward",
      "allreduce",
      "optimizer",
      "graph"};
  std::vector<const RowResult*> ok;
  double max = 0;
  for (const auto& r : rows) {
    if (r.status == "ok" && r.phases_ms.is_object() && !r.phases_ms.empty()) {
      ok.push_back(&r);
      double total = 0;
      for (const auto& p : phases) {
        total += r.phases_ms.value(p, 0.0);
      }
      max = std::max(max, total);
    }
  }
  const int row_h = 22, label_w = 190, plot_w = 420;
  const int h = 50 + row_h * static_cast<int>(ok.size());
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\"><title>Step phases</title>"
      "<text x=\"0\" y=\"16\" font-weight=\"bold\">Where each step's time goes (mean ms per phase)</text>",
      label_w + plot_w + 90,
      h);
  for (std::size_t i = 0; i < ok.size(); ++i) {
    const int y = 28 + row_h * static_cast<int>(i);
    double x = label_w;
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12\">{}</text>",
        label_w - 6,
        y + 14,
        escape(row_name(*ok[i])));
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const double v = ok[i]->phases_ms.value(phases[p], 0.0);
      const double bw = max > 0 ? plot_w * v / max : 0;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{} {:.1f} ms</title></rect>",
          x,
          y + 2,
          bw,
          row_h - 6,
          color(p),
          phases[p],
          v);
      x += bw;
    }
  }
  const int ly = h - 12;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>",
        40 + 110 * static_cast<int>(p),
        ly - 9,
        color(p),
        54 + 110 * static_cast<int>(p),
        ly,
        phases[p]);
  }
  return s + "</svg>";
}

} // namespace

nlohmann::json to_json(const BenchReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.rows) {
    rows.push_back(to_json(r, true));
  }
  return {
      {"environment", report.environment},
      {"steps", report.steps},
      {"cpu_row_seconds", report.cpu_row_seconds},
      {"eval_samples", report.eval_samples},
      {"rows", rows}};
}

BenchReport read_results(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw DataError(
        fmt::format("{}: cannot read", path),
        "give the results.json that hotloop bench wrote");
  }
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
    throw DataError(
        fmt::format(
            "{}: not a hotloop bench results.json (no \"rows\" array)", path),
        "give the results.json that hotloop bench wrote");
  }
  BenchReport r;
  r.environment = j.value("environment", nlohmann::json::object());
  r.steps = j.value("steps", std::int64_t{0});
  r.cpu_row_seconds = j.value("cpu_row_seconds", 0.0);
  r.eval_samples = j.value("eval_samples", std::int64_t{0});
  for (const auto& row : j["rows"]) {
    r.rows.push_back(row_from_json(row));
  }
  return r;
}

std::string report_markdown(const BenchReport& report) {
  std::ostringstream o;
  o << "# hotloop bench\n\n";
  o << "Environment: " << describe_environment(report.environment) << "\n\n";
  o << fmt::format(
      "Every row: the same model, data, seed and {} steps{}; step times and images/s over the steady "
      "steps (the first tenth + 2 left out); validation on {} evenly spaced held-out images. A language "
      "model's row gives tokens/s and next-token accuracy, and is left out of the fastest-row headline.\n\n",
      report.steps,
      report.cpu_row_seconds > 0
          ? fmt::format(
                " (CPU rows stop after {:.0f} s: see their steps)",
                report.cpu_row_seconds)
          : std::string(),
      report.eval_samples);
  o << "| row | status | steps | mean ms/step | median ms/step | images/s | model TFLOP/s (MFU) | "
       "peak alloc MiB | peak reserved MiB | GPU util % | GPU temp °C | power W | throttled samples | "
       "val acc % | SM / tensor / DRAM % (GPM) |\n";
  o << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : report.rows) {
    if (r.status != "ok") {
      o << fmt::format(
          "| {} | {} | - | - | - | - | - | - | - | - | - | - | - | - | - |\n",
          row_name(r),
          r.status == "oom"
              ? "out of memory"
              : r.status + (r.reason.empty() ? "" : ": " + r.reason));
      continue;
    }
    const bool gpu = r.gpu.is_object();
    o << fmt::format(
        "| {} | ok{} | {} | {:.1f} | {:.1f} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {} |\n",
        row_name(r),
        r.cut_by_budget ? " (time budget)" : "",
        r.steps,
        r.mean_step_ms,
        r.median_step_ms,
        rate_text(r),
        flops_text(r),
        mib(r.peak_allocated_bytes),
        mib(r.peak_reserved_bytes),
        range(r.gpu, "util_min", "util_max", ""),
        range(r.gpu, "temp_min", "temp_max", ""),
        gpu && r.gpu.value("power_mean_w", -1.0) >= 0
            ? fmt::format("{:.0f}", r.gpu.value("power_mean_w", 0.0))
            : "-",
        gpu ? std::to_string(r.gpu.value("throttle_samples", 0)) : "-",
        100 * r.val_accuracy,
        gpu && r.gpu.contains("sm_active_mean")
            ? fmt::format(
                  "{:.0f} / {:.0f} / {:.0f}",
                  r.gpu.value("sm_active_mean", 0.0),
                  r.gpu.value("tensor_active_mean", 0.0),
                  r.gpu.value("dram_bw_mean", 0.0))
            : "-");
  }
  const std::string best = headline(report);
  if (!best.empty()) {
    o << "\n" << best << "\n";
  }
  o << "\nCommand: `" << report.environment.value("command_line", "") << "`\n";
  return o.str();
}

std::string headline(const BenchReport& report) {
  const RowResult* best = nullptr;
  for (const auto& r : report.rows) {
    if (r.status == "ok" && r.tokens_per_s == 0 &&
        (best == nullptr || r.images_per_s > best->images_per_s)) {
      best = &r;
    }
  }
  if (best == nullptr) {
    // Language-model rows only: the fastest in tokens/s.
    for (const auto& r : report.rows) {
      if (r.status == "ok" && r.tokens_per_s > 0 &&
          (best == nullptr || r.tokens_per_s > best->tokens_per_s)) {
        best = &r;
      }
    }
    return best == nullptr
        ? ""
        : fmt::format(
              "Fastest: {} at {:.0f} tokens/s ({:.1f} ms/step median, val loss {:.3f}).",
              row_name(*best),
              best->tokens_per_s,
              best->median_step_ms,
              best->val_loss);
  }
  std::string s = fmt::format(
      "Fastest: {} at {:.0f} images/s ({:.1f} ms/step median, val accuracy {:.1f}%)",
      row_name(*best),
      best->images_per_s,
      best->median_step_ms,
      100 * best->val_accuracy);
  for (const auto& r : report.rows) {
    if (&r != best && r.status == "ok" && r.row.device == best->row.device &&
        r.row.batch == best->row.batch && r.row.model == best->row.model &&
        r.resolved_precision == "fp32" && r.images_per_s > 0) {
      s += fmt::format(
          "; {:.2f}x the fp32 row at the same batch",
          best->images_per_s / r.images_per_s);
    }
  }
  return s + ".";
}

std::string report_html(const BenchReport& report) {
  std::vector<std::pair<std::string, double>> step_bars;
  std::vector<std::pair<std::string, double>> rate_bars;
  std::vector<std::string> notes;
  std::vector<std::string> rate_notes;
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>
      losses;
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>
      util, temp, mem;
  for (const auto& r : report.rows) {
    const std::string name = row_name(r);
    step_bars.emplace_back(name, r.status == "ok" ? r.median_step_ms : 0);
    notes.push_back(
        r.status == "oom"
            ? "out of memory"
            : (r.status == "ok" ? "" : r.status + ": " + r.reason));
    if (r.tokens_per_s == 0) { // images/s only: tokens/s is another unit
      rate_bars.emplace_back(name, r.status == "ok" ? r.images_per_s : 0);
      rate_notes.push_back(notes.back());
    }
    if (r.status == "ok" && !r.losses.empty()) {
      std::vector<std::pair<double, double>> pts;
      for (std::size_t i = 0; i < r.losses.size(); ++i) {
        pts.emplace_back(static_cast<double>(i + 1), r.losses[i]);
      }
      losses.emplace_back(name, pts);
    }
    if (r.gpu_series.is_array() && !r.gpu_series.empty()) {
      std::vector<std::pair<double, double>> u, t, m;
      for (const auto& p : r.gpu_series) {
        u.emplace_back(p.value("t", 0.0), p.value("util", -1.0));
        t.emplace_back(p.value("t", 0.0), p.value("temp", -1.0));
        m.emplace_back(p.value("t", 0.0), p.value("mem_gib", -1.0));
      }
      util.emplace_back(name, u);
      temp.emplace_back(name, t);
      mem.emplace_back(name, m);
    }
  }
  std::ostringstream o;
  o << "<h1>hotloop bench</h1><p>"
    << escape(describe_environment(report.environment)) << "</p>";
  const std::string best = headline(report);
  if (!best.empty()) {
    o << "<p><b>" << escape(best) << "</b></p>";
  }
  o << "<table class=\"numbers\"><tr><th>row</th><th>status</th><th>steps</th><th>median ms/step</th><th>images/s</th>"
       "<th>peak reserved MiB</th><th>GPU util %</th><th>GPU °C</th><th>val acc %</th></tr>";
  for (const auto& r : report.rows) {
    o << fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(row_name(r)),
        escape(
            r.status == "ok"
                ? (r.cut_by_budget ? "ok (time budget)" : "ok")
                : (r.status == "oom" ? "out of memory"
                                     : r.status + ": " + r.reason)),
        r.steps,
        r.status == "ok" ? fmt::format("{:.1f}", r.median_step_ms) : "-",
        r.status == "ok" ? rate_text(r) : "-",
        mib(r.peak_reserved_bytes),
        range(r.gpu, "util_min", "util_max", ""),
        range(r.gpu, "temp_min", "temp_max", ""),
        r.status == "ok" ? fmt::format("{:.1f}", 100 * r.val_accuracy) : "-");
  }
  o << "</table>";
  o << bar_chart(
      "Step time (median ms, lower is better)", step_bars, notes, "ms");
  o << bar_chart(
      "Throughput (images/s, higher is better)",
      rate_bars,
      rate_notes,
      "img/s");
  o << line_chart("Training loss", "step", "loss", losses);
  if (util.empty()) {
    o << "<p>GPU utilization, temperature and memory over time: no GPU rows ran (no GPU).</p>";
  } else {
    o << line_chart("GPU utilization over each row", "seconds", "%", util);
    o << line_chart("GPU temperature over each row", "seconds", "°C", temp);
    o << line_chart("GPU memory used over each row", "seconds", "GiB", mem);
  }
  o << phase_chart(report.rows);
  o << "<p>Command: <code>"
    << escape(report.environment.value("command_line", "")) << "</code></p>\n";
  return html::page("hotloop bench", o.str());
}

void write_report(const std::string& dir, const BenchReport& report) {
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) {
    write_text_atomic((fs::path(dir) / name).string(), text);
  };
  write("results.json", to_json(report).dump(2) + "\n");
  write("report.md", report_markdown(report));
  write("report.html", report_html(report));
}

} // namespace hotloop::testplan
