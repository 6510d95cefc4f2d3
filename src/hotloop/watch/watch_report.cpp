#include "hotloop/watch/watch_report.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "hotloop/core/html_page.h"
#include "hotloop/core/svg_chart.h"
#include "hotloop/core/units.h"
#include "hotloop/telemetry/prometheus_writer.h"

namespace hotloop::watch {

namespace {

using svg::escape;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The GPU indices the job used, in order.
std::vector<unsigned int> job_gpus(const WatchRecord& r) {
  std::set<unsigned int> out;
  for (const auto& s : r.samples) {
    for (const auto& g : s.gpus) {
      out.insert(g.gpu.index);
    }
  }
  return {out.begin(), out.end()};
}

// Up to `limit` processes with the highest mean CPU use, as chart series.
std::vector<svg::Series> process_series(
    const WatchRecord& r,
    std::size_t limit) {
  std::map<int, std::pair<std::string, double>> totals;
  for (const auto& s : r.samples) {
    for (const auto& p : s.processes) {
      auto& [name, sum] = totals[p.pid];
      name = fmt::format(
          "{} {}{}", p.name, p.pid, p.pid == s.main_pid ? " (main)" : "");
      sum += p.cpu_percent;
    }
  }
  std::vector<std::pair<int, double>> order;
  for (const auto& [pid, ns] : totals) {
    order.emplace_back(pid, ns.second);
  }
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) {
    return a.second > b.second;
  });
  std::vector<svg::Series> out;
  for (std::size_t i = 0; i < order.size() && i < limit; ++i) {
    const int pid = order[i].first;
    svg::Series series{totals[pid].first, {}};
    for (const auto& s : r.samples) {
      double v = -1; // absent: left out of the line
      for (const auto& p : s.processes) {
        if (p.pid == pid) {
          v = p.cpu_percent;
        }
      }
      series.second.emplace_back(s.elapsed_s, v);
    }
    out.push_back(std::move(series));
  }
  return out;
}

template <typename F>
svg::Series gpu_series(
    const WatchRecord& r,
    unsigned int index,
    const std::string& name,
    F value) {
  svg::Series series{name, {}};
  for (const auto& s : r.samples) {
    for (const auto& g : s.gpus) {
      if (g.gpu.index == index) {
        const std::optional<double> v = value(g);
        series.second.emplace_back(s.elapsed_s, v ? *v : -1.0);
      }
    }
  }
  return series;
}

template <typename T>
std::optional<double> as_double(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

std::string finding_rows(const telemetry::Diagnosis& d) {
  std::string out;
  for (const auto& f : d.findings) {
    out += fmt::format(
        "<tr><td><b>{}</b></td><td>{}</td><td>{}</td></tr>",
        escape(f.verdict),
        escape(f.evidence),
        escape(f.fix));
  }
  return out;
}

} // namespace

nlohmann::json summary_json(const WatchRecord& r) {
  std::set<int> pids;
  std::size_t most = 0;
  for (const auto& s : r.samples) {
    most = std::max(most, s.processes.size());
    for (const auto& p : s.processes) {
      pids.insert(p.pid);
    }
  }
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : r.windows) {
    windows.push_back(
        {{"from_s", w.from_s},
         {"to_s", w.to_s},
         {"verdict", w.diagnosis.primary().verdict},
         {"evidence", w.diagnosis.primary().evidence}});
  }
  nlohmann::json steps = nullptr;
  if (!r.steps.empty()) {
    const auto& first = r.steps.front();
    const auto& last = r.steps.back();
    const double span = last.elapsed_s - first.elapsed_s;
    std::optional<double> last_loss; // jobs read the loss every few steps
    for (auto it = r.steps.rbegin(); it != r.steps.rend() && !last_loss; ++it) {
      last_loss = it->loss;
    }
    steps = {
        {"reported", r.steps.size()},
        {"first_step", first.step},
        {"last_step", last.step},
        {"steps_per_s",
         span > 0 ? static_cast<double>(r.steps.size() - 1) / span : 0.0},
        {"last_loss", last_loss ? nlohmann::json(*last_loss) : nullptr},
        {"lines_not_understood", r.bad_step_lines}};
    if (r.bad_step_lines > 0) {
      steps["first_line_not_understood"] = r.first_bad_step_line;
    }
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto i : job_gpus(r)) {
    gpus.push_back(i);
  }
  return {
      {"command", r.command},
      {"pid", r.pid},
      {"started_by_watch", r.started_by_watch},
      {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nullptr},
      {"ended", r.ended},
      {"wall_s", r.wall_s},
      {"interval_s", r.interval_s},
      {"samples", r.samples.size()},
      {"verdict", r.run.primary().verdict},
      {"diagnosis", telemetry::to_json(r.run)},
      {"windows", windows},
      {"gpus", gpus},
      {"processes", {{"most_at_once", most}, {"seen", pids.size()}}},
      {"steps", steps},
      {"overhead",
       {{"watch_cpu_s", r.watch_cpu_s},
        {"wall_s", r.wall_s},
        {"cpu_share_percent",
         r.wall_s > 0 ? 100.0 * r.watch_cpu_s / r.wall_s : 0.0}}},
      {"notes", r.notes},
      {"files",
       {{"telemetry", "telemetry.jsonl"},
        {"report", "report.html"},
        {"tensorboard",
         r.tensorboard ? nlohmann::json("tensorboard") : nlohmann::json()}}}};
}

namespace {

// GPU i's timelines: kernel time, memory, power and temperature.
std::string gpu_charts(const WatchRecord& r, unsigned int i) {
  std::string charts;
  charts += svg::line_chart(
      fmt::format("GPU {}: time a kernel ran", i),
      "seconds",
      "percent",
      {gpu_series(
           r,
           i,
           "whole GPU",
           [](const JobGpu& g) { return as_double(g.gpu.util_percent); }),
       gpu_series(
           r,
           i,
           "the job's share",
           [](const JobGpu& g) { return g.job_sm_percent; }),
       gpu_series(
           r,
           i,
           "other processes",
           [](const JobGpu& g) { return g.others_sm_percent; })},
      100);
  charts += svg::line_chart(
      fmt::format("GPU {}: memory", i),
      "seconds",
      "GiB",
      {gpu_series(
           r,
           i,
           "used on the GPU",
           [](const JobGpu& g) {
             return g.gpu.memory_used_bytes
                 ? std::optional<double>(*g.gpu.memory_used_bytes / kGiB)
                 : std::nullopt;
           }),
       gpu_series(r, i, "the job's", [](const JobGpu& g) {
         return std::optional<double>(g.job_memory_bytes / kGiB);
       })});
  charts += svg::line_chart(
      fmt::format("GPU {}: power and temperature", i),
      "seconds",
      "W, °C",
      {gpu_series(
           r, i, "power (W)", [](const JobGpu& g) { return g.gpu.power_w; }),
       gpu_series(r, i, "temperature (°C)", [](const JobGpu& g) {
         return as_double(g.gpu.temperature_c);
       })});
  return charts;
}

// The job's processes and the machine.
std::string host_charts(const WatchRecord& r) {
  std::string charts;
  charts += svg::line_chart(
      "CPU per process (100% = one core)",
      "seconds",
      "percent of a core",
      process_series(r, 8));
  svg::Series host{"machine CPU", {}};
  svg::Series iowait{"I/O wait", {}};
  for (const auto& s : r.samples) {
    host.second.emplace_back(s.elapsed_s, s.host_cpu_percent.value_or(-1));
    iowait.second.emplace_back(s.elapsed_s, s.host_iowait_percent.value_or(-1));
  }
  charts += svg::line_chart(
      "The machine (all cores)", "seconds", "percent", {host, iowait}, 100);
  return charts;
}

// Steps per second in each sample interval, and the loss, when the job
// reported steps.
std::string step_charts(const WatchRecord& r) {
  std::string charts;
  if (r.steps.size() > 1) {
    // Steps per second in each sample interval, and the loss.
    svg::Series rate{"steps/s", {}};
    svg::Series loss{"loss", {}};
    std::size_t j = 0;
    double prev_t = 0;
    for (const auto& s : r.samples) {
      std::size_t n = 0;
      while (j < r.steps.size() && r.steps[j].elapsed_s <= s.elapsed_s) {
        if (r.steps[j].loss) {
          loss.second.emplace_back(r.steps[j].elapsed_s, *r.steps[j].loss);
        }
        ++n;
        ++j;
      }
      if (s.elapsed_s > prev_t) {
        rate.second.emplace_back(
            s.elapsed_s, static_cast<double>(n) / (s.elapsed_s - prev_t));
      }
      prev_t = s.elapsed_s;
    }
    charts += svg::line_chart("Steps reported", "seconds", "steps/s", {rate});
    if (!loss.second.empty()) {
      charts += svg::line_chart("Loss reported", "seconds", "loss", {loss});
    }
  }
  return charts;
}

// Consecutive windows with the same verdict share a row (the latest one's
// evidence).
std::string window_rows(const WatchRecord& r) {
  std::string windows;
  for (std::size_t i = 0; i < r.windows.size();) {
    std::size_t j = i;
    const auto& verdict = r.windows[i].diagnosis.primary().verdict;
    while (j + 1 < r.windows.size() &&
           r.windows[j + 1].diagnosis.primary().verdict == verdict) {
      ++j;
    }
    const auto& f = r.windows[j].diagnosis.primary();
    windows += fmt::format(
        "<tr><td>{:.0f}-{:.0f} s{}</td><td><b>{}</b></td><td>{}</td><td>{}</td></tr>",
        r.windows[i].from_s,
        r.windows[j].to_s,
        j > i ? fmt::format(" ({} windows)", j - i + 1) : std::string(),
        escape(f.verdict),
        escape(f.evidence),
        escape(f.fix));
    i = j + 1;
  }
  return windows;
}

} // namespace

std::string report_html(const WatchRecord& r) {
  std::string charts;
  for (const auto i : job_gpus(r)) {
    charts += gpu_charts(r, i);
  }
  if (job_gpus(r).empty()) {
    charts += "<p class=\"note\">The job used no GPU: no GPU timelines.</p>";
  }
  charts += host_charts(r) + step_charts(r);
  const std::string windows = window_rows(r);
  std::string notes;
  for (const auto& n : r.notes) {
    notes += "<li>" + escape(n) + "</li>";
  }
  const std::string body = fmt::format(
      "<h1>hotloop watch</h1>"
      "<p><code>{cmd}</code><br>pid {pid}{how}; {wall:.0f} s; {samples} samples every {interval:g} s; {ended}</p>"
      "<h2>Verdict: {verdict}</h2>"
      "<table><tr><th>verdict</th><th>evidence</th><th>fix</th></tr>{findings}</table>"
      "{notes}"
      "<h2>Timelines</h2>{charts}"
      "<h2>Verdicts per window</h2>"
      "<table><tr><th>window</th><th>verdict</th><th>evidence</th><th>fix</th></tr>{windows}</table>"
      "<p class=\"note\">Watching cost {cpu:.2f} CPU seconds in {wall:.0f} s ({share:.2f}% of one core). "
      "Every sample is in telemetry.jsonl; summary.json has the verdicts; tensorboard/ has the timelines.</p>\n",
      fmt::arg("cmd", escape(r.command)),
      fmt::arg("pid", r.pid),
      fmt::arg(
          "how",
          r.started_by_watch ? std::string(", started by watch")
                             : std::string(", attached")),
      fmt::arg("wall", r.wall_s),
      fmt::arg("samples", r.samples.size()),
      fmt::arg("interval", r.interval_s),
      fmt::arg(
          "ended",
          escape(
              r.ended +
              (r.exit_code ? fmt::format(" with exit code {}", *r.exit_code)
                           : std::string()))),
      fmt::arg("verdict", escape(r.run.primary().verdict)),
      fmt::arg("findings", finding_rows(r.run)),
      fmt::arg(
          "notes", notes.empty() ? std::string() : "<ul>" + notes + "</ul>"),
      fmt::arg("charts", charts),
      fmt::arg("windows", windows),
      fmt::arg("cpu", r.watch_cpu_s),
      fmt::arg("share", r.wall_s > 0 ? 100.0 * r.watch_cpu_s / r.wall_s : 0.0));
  return html::page("hotloop watch: " + r.command, body);
}

std::string prometheus_text(
    const JobSample& s,
    const std::optional<telemetry::Diagnosis>& d,
    double steps_per_s,
    std::optional<double> loss) {
  telemetry::PrometheusWriter w("hotloop_watch_");
  const auto gpu = [](const JobGpu& g) { return std::to_string(g.gpu.index); };
  w.family(
      "gpu_utilization_percent",
      "gauge",
      "Time a kernel ran on the GPU (NVML)");
  for (const auto& g : s.gpus) {
    w.sample({{"gpu", gpu(g)}}, g.gpu.util_percent.value_or(0));
  }
  w.family("job_sm_percent", "gauge", "The job's own share of SM time");
  for (const auto& g : s.gpus) {
    if (g.job_sm_percent) {
      w.sample({{"gpu", gpu(g)}}, *g.job_sm_percent);
    }
  }
  w.family(
      "job_gpu_memory_bytes", "gauge", "GPU memory the job's processes hold");
  for (const auto& g : s.gpus) {
    w.sample({{"gpu", gpu(g)}}, static_cast<double>(g.job_memory_bytes));
  }
  w.family("gpu_power_watts", "gauge", "GPU power draw");
  for (const auto& g : s.gpus) {
    if (g.gpu.power_w) {
      w.sample({{"gpu", gpu(g)}}, *g.gpu.power_w);
    }
  }
  w.family("gpu_temperature_celsius", "gauge", "GPU temperature");
  for (const auto& g : s.gpus) {
    if (g.gpu.temperature_c) {
      w.sample({{"gpu", gpu(g)}}, *g.gpu.temperature_c);
    }
  }
  w.family(
      "process_cpu_percent",
      "gauge",
      "CPU use of each process of the job (100 = one core)");
  double rss = 0;
  for (const auto& p : s.processes) {
    w.sample({{"pid", std::to_string(p.pid)}, {"name", p.name}}, p.cpu_percent);
    rss += static_cast<double>(p.rss_bytes);
  }
  w.gauge("job_rss_bytes", "Resident memory of the job's processes", rss);
  w.gauge(
      "job_processes",
      "Processes in the job's tree",
      static_cast<double>(s.processes.size()));
  w.gauge(
      "host_cpu_percent",
      "The machine's CPU use (all cores)",
      s.host_cpu_percent.value_or(0));
  w.gauge(
      "host_iowait_percent",
      "The machine's I/O wait",
      s.host_iowait_percent.value_or(0));
  w.gauge("steps_per_second", "Steps the job reported per second", steps_per_s);
  if (loss) {
    w.gauge("loss", "The last loss the job reported", *loss);
  }
  if (d) {
    w.family(
         "verdict",
         "gauge",
         "The latest window's verdict (1 for the one that holds)")
        .sample({{"verdict", d->primary().verdict}}, 1);
  }
  return w.text();
}

std::vector<std::pair<std::string, double>> tensorboard_values(
    const JobSample& s,
    double steps_per_s,
    std::optional<double> loss) {
  std::vector<std::pair<std::string, double>> v;
  for (const auto& g : s.gpus) {
    const std::string p = fmt::format("watch/gpu{}/", g.gpu.index);
    if (g.gpu.util_percent) {
      v.emplace_back(p + "utilization_percent", *g.gpu.util_percent);
    }
    if (g.job_sm_percent) {
      v.emplace_back(p + "job_sm_percent", *g.job_sm_percent);
    }
    if (g.others_sm_percent) {
      v.emplace_back(p + "others_sm_percent", *g.others_sm_percent);
    }
    v.emplace_back(p + "job_memory_gib", g.job_memory_bytes / 1073741824.0);
    if (g.gpu.memory_used_bytes) {
      v.emplace_back(
          p + "memory_used_gib", *g.gpu.memory_used_bytes / 1073741824.0);
    }
    if (g.gpu.power_w) {
      v.emplace_back(p + "power_w", *g.gpu.power_w);
    }
    if (g.gpu.temperature_c) {
      v.emplace_back(p + "temperature_c", *g.gpu.temperature_c);
    }
    if (g.gpu.sm_clock_mhz) {
      v.emplace_back(p + "sm_clock_mhz", *g.gpu.sm_clock_mhz);
    }
  }
  double cpu = 0;
  double main = 0;
  double rss = 0;
  for (const auto& p : s.processes) {
    cpu += p.cpu_percent;
    rss += static_cast<double>(p.rss_bytes);
    main = p.pid == s.main_pid ? p.cpu_percent : main;
  }
  v.emplace_back("watch/job/cpu_percent", cpu);
  v.emplace_back("watch/job/main_cpu_percent", main);
  v.emplace_back("watch/job/rss_gib", rss / 1073741824.0);
  v.emplace_back(
      "watch/job/processes", static_cast<double>(s.processes.size()));
  if (s.host_cpu_percent) {
    v.emplace_back("watch/host/cpu_percent", *s.host_cpu_percent);
    v.emplace_back(
        "watch/host/iowait_percent", s.host_iowait_percent.value_or(0));
  }
  v.emplace_back("watch/steps/steps_per_s", steps_per_s);
  if (loss) {
    v.emplace_back("watch/steps/loss", *loss);
  }
  return v;
}

// The live line: time, the job's GPU share, memory, CPU of the main process
// and the busiest helpers, steps/s, the latest verdict.
std::string status_line(
    const JobSample& s,
    double steps_per_s,
    const std::string& verdict) {
  std::string line = fmt::format("watch {:>4.0f}s", s.elapsed_s);
  for (const auto& g : s.gpus) {
    line += fmt::format(
        "  gpu{} {}%{}  {}",
        g.gpu.index,
        g.gpu.util_percent.value_or(0),
        g.job_sm_percent ? fmt::format(" (job {:.0f}%)", *g.job_sm_percent)
                         : std::string(),
        format_bytes(g.job_memory_bytes));
  }
  if (s.gpus.empty()) {
    line += "  no GPU";
  }
  double main = 0;
  double helpers = 0;
  for (const auto& p : s.processes) {
    (p.pid == s.main_pid ? main : helpers) += p.cpu_percent;
  }
  line += fmt::format("  cpu main {:.0f}%", main);
  if (s.processes.size() > 1) {
    line += fmt::format(" +{} proc {:.0f}%", s.processes.size() - 1, helpers);
  }
  if (steps_per_s > 0) {
    line += fmt::format("  {:.2f} steps/s", steps_per_s);
  }
  if (!verdict.empty()) {
    line += "  [" + verdict + "]";
  }
  return line;
}

} // namespace hotloop::watch
