// `hotloop monitor`: every GPU and its processes, live, like nvidia-smi dmon,
// with the throttle reasons in words.

#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/core/stop_signal.h"
#include "hotloop/core/units.h"
#include "hotloop/env/nvml_library.h"
#include "hotloop/telemetry/samples.h"

namespace hotloop::cli {

namespace {

struct MonitorFlags {
  double interval_s = 1.0;
  bool once = false;
  bool json = false;
  std::string nvml_lib;
  int count = 0;
};

template <typename T>
std::string cell(const std::optional<T>& v, const char* fmt_text) {
  return v ? fmt::format(fmt::runtime(fmt_text), *v) : std::string("-");
}

void print_header() {
  fmt::print(
      "{:>3} {:>5} {:>5} {:>6} {:>7} {:>5} {:>19} {:>7} {:>5} {:>11} {:>6} {:>9} {:>9}  {}\n",
      "gpu",
      "sm%",
      "mem%",
      "smact%",
      "tensor%",
      "dram%",
      "memory used",
      "power",
      "temp",
      "sm clock",
      "mclk",
      "pcie rx",
      "pcie tx",
      "throttle");
}

void print_sample(const telemetry::Sample& s) {
  for (const auto& g : s.gpus) {
    std::string reasons;
    if (g.throttle_reasons) {
      for (const auto& r : env::throttle_reason_names(*g.throttle_reasons)) {
        reasons += (reasons.empty() ? "" : ", ") + r;
      }
    }
    fmt::print(
        "{:>3} {:>5} {:>5} {:>6} {:>7} {:>5} {:>19} {:>7} {:>5} {:>11} {:>6} {:>9} {:>9}  {}\n",
        g.index,
        cell(g.util_percent, "{}"),
        cell(g.memory_util_percent, "{}"),
        g.gpm ? cell(g.gpm->sm_active_percent, "{:.0f}") : std::string("-"),
        g.gpm ? cell(g.gpm->tensor_active_percent, "{:.0f}") : std::string("-"),
        g.gpm ? cell(g.gpm->dram_bw_percent, "{:.0f}") : std::string("-"),
        g.memory_used_bytes && g.memory_total_bytes
            ? fmt::format(
                  "{} / {}",
                  format_bytes(*g.memory_used_bytes),
                  format_bytes(*g.memory_total_bytes))
            : std::string("-"),
        cell(g.power_w, "{:.0f} W"),
        cell(g.temperature_c, "{} C"),
        g.sm_clock_mhz
            ? fmt::format(
                  "{}/{}",
                  *g.sm_clock_mhz,
                  g.sm_clock_max_mhz ? std::to_string(*g.sm_clock_max_mhz)
                                     : std::string("?"))
            : std::string("-"),
        cell(g.memory_clock_mhz, "{}"),
        cell(g.pcie_rx_mb_s, "{:.0f} MB/s"),
        cell(g.pcie_tx_mb_s, "{:.0f} MB/s"),
        reasons.empty() ? std::string("-") : reasons);
    if (g.processes) {
      for (const auto& p : *g.processes) {
        fmt::print(
            "      pid {:>7}  {:<24} {}\n",
            p.pid,
            p.name,
            format_bytes(p.used_bytes));
      }
    }
  }
  fmt::print(
      "host: cpu {}  hotloop rss {}\n",
      cell(s.host.cpu_percent, "{:.0f}%"),
      format_bytes(s.host.rss_bytes));
  std::fflush(stdout);
}

int run_monitor(const MonitorFlags& f) {
  if (f.interval_s <= 0) {
    throw UsageError("--interval: must be positive");
  }
  const auto lib = nvml::Library::open(
      f.nvml_lib.empty() ? nvml::default_library_path() : f.nvml_lib);
  telemetry::HostCpu cpu;
  cpu.percent();
  // GPM counters (Hopper and later) measure between two samples: the first
  // is taken now, so that the first line has them too.
  telemetry::GpmSampler gpm(*lib);
  (void)telemetry::sample_gpus(*lib, &gpm);
  StopSignal stop;
  for (int n = 0;; ++n) {
    // The host's CPU use needs an interval to measure over, the first
    // sample's too.
    std::this_thread::sleep_for(std::chrono::duration<double>(
        n == 0 ? std::min(f.interval_s, 0.2) : f.interval_s));
    telemetry::Sample s;
    s.unix_time = std::chrono::duration<double>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    s.gpus = telemetry::sample_gpus(*lib, &gpm);
    s.host.cpu_percent = cpu.percent();
    s.host.rss_bytes = telemetry::process_rss_bytes();
    if (f.json) {
      fmt::print("{}\n", telemetry::to_json(s).dump(f.once ? 2 : -1));
      std::fflush(stdout);
    } else {
      if (n % 20 == 0) {
        print_header();
      }
      print_sample(s);
    }
    if (f.once || (f.count > 0 && n + 1 >= f.count) || stop.flag()->load()) {
      return 0;
    }
  }
}

} // namespace

void add_monitor_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<MonitorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Every GPU and its processes, live: utilization, memory, power, temperature, clocks, PCIe, throttle reasons");
  cmd->add_option("--interval", f->interval_s, "Seconds between samples");
  cmd->add_flag("--once", f->once, "One sample, then exit");
  cmd->add_option("--count", f->count, "Stop after N samples; 0: until Ctrl-C");
  cmd->add_flag(
      "--json", f->json, "JSON: one object per sample (pretty with --once)");
  cmd->add_option(
      "--nvml-lib",
      f->nvml_lib,
      "The NVML library; empty: $HOTLOOP_NVML_LIB or libnvidia-ml.so.1");
  cmd->footer(
      "Examples:\n"
      "  hotloop monitor                 # a line per GPU per second, Ctrl-C to stop\n"
      "  hotloop monitor --once --json   # one sample for scripts\n"
      "Exit code: 1 when NVML cannot be loaded (no NVIDIA driver).");
  cmd->callback([f, &action] { action = [f] { return run_monitor(*f); }; });
}

} // namespace hotloop::cli
