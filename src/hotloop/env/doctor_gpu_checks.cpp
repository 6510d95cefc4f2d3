// doctor's per-GPU checks: inventory, architecture, and the conditions that
// slow training.
#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/core/units.h"
#include "hotloop/env/doctor_checks.h"
#include "hotloop/env/nvml_api.h"
#include "hotloop/env/own_process.h"

namespace hotloop::env::checks {
namespace {

std::string gpu_id(const GpuFacts& g, const char* what) {
  return fmt::format("gpu{}.{}", g.index, what);
}

Check skipped(std::string id, std::string why) {
  return Check{std::move(id), Status::Skip, std::move(why), {}, {}};
}

// The process list without hotloop itself (which has not touched the GPU
// when NVML is read; inside a container its pid is not NVML's anyway).
std::vector<GpuProcess> other_processes(
    const GpuFacts& g,
    unsigned int self_pid,
    bool host_pids) {
  if (!g.processes.has_value()) {
    return {};
  }
  ProcessIdentity me;
  me.pid = self_pid;
  me.host_pids = host_pids;
  return env::other_processes(*g.processes, me).processes;
}

Check inventory(const GpuFacts& g) {
  Check c{gpu_id(g, "inventory"), Status::Pass, {}, {}, {}};
  c.facts = {
      {"name", fact(g.name)},
      {"uuid", fact(g.uuid)},
      {"memory_total_bytes", fact(g.memory_total_bytes)},
      {"memory_used_bytes", fact(g.memory_used_bytes)},
      {"memory_free_bytes", fact(g.memory_free_bytes)},
      {"utilization_percent", fact(g.utilization_percent)},
      {"temperature_c", fact(g.temperature_c)},
      {"slowdown_temperature_c", fact(g.slowdown_temperature_c)},
      {"power_w", fact(g.power_w)},
      {"power_limit_w", fact(g.power_limit_w)},
      {"sm_clock_mhz", fact(g.sm_clock_mhz)},
      {"sm_clock_max_mhz", fact(g.sm_clock_max_mhz)},
      {"persistence_mode", fact(g.persistence_mode)},
      {"mig_enabled", fact(g.mig_enabled)}};
  c.facts["throttle_reasons"] = g.throttle_reasons.has_value()
      ? nlohmann::json(throttle_reason_names(*g.throttle_reasons))
      : fact(g.throttle_reasons);
  c.facts["pcie"] = fact(g.pcie);
  c.facts["compute_capability"] = g.compute_capability.has_value()
      ? nlohmann::json(fmt::format(
            "{}.{}", g.compute_capability->first, g.compute_capability->second))
      : fact(g.compute_capability);
  c.facts["processes"] = fact(g.processes);

  if (!g.name.has_value()) {
    c.status = Status::Fail;
    c.summary = g.name.missing_reason;
    c.fix =
        "NVML cannot read this GPU: check `nvidia-smi` and dmesg (Xid errors); a reset or reboot may be needed";
    return c;
  }
  std::vector<std::string> parts{*g.name};
  if (g.memory_total_bytes.has_value()) {
    parts.push_back(fmt::format(
        "{} ({} used)",
        format_bytes(*g.memory_total_bytes),
        format_bytes(g.memory_used_bytes.value.value_or(0))));
  }
  if (g.temperature_c.has_value()) {
    parts.push_back(fmt::format("{} °C", *g.temperature_c));
  }
  if (g.power_w.has_value()) {
    parts.push_back(
        g.power_limit_w.has_value()
            ? fmt::format("{:.0f}/{:.0f} W", *g.power_w, *g.power_limit_w)
            : fmt::format("{:.0f} W", *g.power_w));
  }
  if (g.sm_clock_mhz.has_value()) {
    parts.push_back(
        g.sm_clock_max_mhz.has_value()
            ? fmt::format("SM {}/{} MHz", *g.sm_clock_mhz, *g.sm_clock_max_mhz)
            : fmt::format("SM {} MHz", *g.sm_clock_mhz));
  }
  if (g.compute_capability.has_value()) {
    parts.push_back(fmt::format(
        "compute {}.{}",
        g.compute_capability->first,
        g.compute_capability->second));
  }
  c.summary = fmt::format("{}", fmt::join(parts, ", "));
  std::vector<std::string> skipped_facts;
  for (const auto& [key, value] : c.facts.items()) {
    if (value.is_object() && value.contains("skipped")) {
      skipped_facts.push_back(key);
    }
  }
  if (!skipped_facts.empty()) {
    c.summary +=
        fmt::format(" (not readable: {})", fmt::join(skipped_facts, ", "));
  }
  return c;
}

Check arch(const GpuFacts& g, const TorchFacts& t) {
  const std::string id = gpu_id(g, "arch");
  if (!g.compute_capability.has_value()) {
    return skipped(
        id,
        "compute capability unknown: " + g.compute_capability.missing_reason);
  }
  const auto [major, minor] = *g.compute_capability;
  if (!t.built.compiled_with_cuda) {
    return skipped(id, "LibTorch has no CUDA kernels");
  }
  if (t.cuda_arch_list.empty()) {
    return skipped(
        id,
        "LibTorch's architecture list is unknown (set HOTLOOP_TORCH_CUDA_ARCH_LIST at build time); "
        "cuda.kernel tests a real kernel instead");
  }
  Check c{id, Status::Pass, {}, {}, {}};
  c.facts = {
      {"compute_capability", fmt::format("{}.{}", major, minor)},
      {"arch_list", t.cuda_arch_list}};
  if (const auto match = matching_arch(t.cuda_arch_list, major, minor)) {
    c.facts["runs"] = *match;
    c.summary = fmt::format(
        "compute capability {}.{} runs LibTorch's {} code",
        major,
        minor,
        *match);
  } else {
    c.status = Status::Fail;
    c.summary = fmt::format(
        "compute capability {}.{} is not in LibTorch's architectures ({})",
        major,
        minor,
        t.cuda_arch_list);
    c.fix = fmt::format(
        "install a LibTorch/torch build compiled for sm_{}{} (or one with PTX it can JIT)",
        major,
        minor);
  }
  return c;
}

Check thermal(const GpuFacts& g, const DoctorThresholds& th) {
  const std::string id = gpu_id(g, "thermal");
  if (!g.temperature_c.has_value()) {
    return skipped(
        id, "temperature not readable: " + g.temperature_c.missing_reason);
  }
  Check c{id, Status::Pass, {}, {}, {}};
  c.facts = {
      {"temperature_c", *g.temperature_c},
      {"slowdown_temperature_c", fact(g.slowdown_temperature_c)}};
  if (!g.slowdown_temperature_c.has_value()) {
    c.summary = fmt::format(
        "{} °C (slowdown threshold not readable: {})",
        *g.temperature_c,
        g.slowdown_temperature_c.missing_reason);
    return c;
  }
  const unsigned int t = *g.temperature_c;
  const unsigned int slow = *g.slowdown_temperature_c;
  c.summary = fmt::format("{} °C, slowdown at {} °C", t, slow);
  if (t + th.temperature_margin_c >= slow) {
    c.status = Status::Warn;
    c.summary += t >= slow ? ": clocks are being lowered"
                           : ": close to the slowdown threshold";
    c.fix =
        "improve cooling: check fans and airflow, clean filters, lower the ambient temperature, space the cards; "
        "`nvidia-smi -q -d TEMPERATURE,PERFORMANCE` shows the details";
  }
  return c;
}

Check throttle(const GpuFacts& g) {
  const std::string id = gpu_id(g, "throttle");
  if (!g.throttle_reasons.has_value()) {
    return skipped(
        id,
        "throttle reasons not readable: " + g.throttle_reasons.missing_reason);
  }
  const std::uint64_t mask = *g.throttle_reasons;
  Check c{id, Status::Pass, {}, {}, {}};
  c.facts = {
      {"reasons", throttle_reason_names(mask)},
      {"mask", mask},
      {"sm_clock_mhz", fact(g.sm_clock_mhz)},
      {"sm_clock_max_mhz", fact(g.sm_clock_max_mhz)}};
  const std::string clocks =
      g.sm_clock_mhz.has_value() && g.sm_clock_max_mhz.has_value()
      ? fmt::format(
            "SM clock {} of max {} MHz", *g.sm_clock_mhz, *g.sm_clock_max_mhz)
      : std::string("SM clock unknown");
  constexpr std::uint64_t kThermal =
      nvml::kThrottleSwThermalSlowdown | nvml::kThrottleHwThermalSlowdown;
  constexpr std::uint64_t kPower = nvml::kThrottleSwPowerCap;
  constexpr std::uint64_t kHardware =
      nvml::kThrottleHwSlowdown | nvml::kThrottleHwPowerBrakeSlowdown;
  const std::uint64_t harmful = mask & (kThermal | kPower | kHardware);
  if (harmful == 0) {
    const auto names = throttle_reason_names(mask);
    c.summary = names.empty()
        ? "no clock throttling; " + clocks
        : fmt::format("not throttled ({}); {}", fmt::join(names, ", "), clocks);
    return c;
  }
  c.status = Status::Warn;
  c.summary = fmt::format(
      "throttled now: {}; {}",
      fmt::join(throttle_reason_names(harmful), ", "),
      clocks);
  std::vector<std::string> fixes;
  if ((harmful & kThermal) != 0) {
    fixes.push_back("thermal: improve cooling and airflow (see gpuN.thermal)");
  }
  if ((harmful & kPower) != 0) {
    fixes.push_back(
        g.power_limit_w.has_value()
            ? fmt::format(
                  "power: the board is held at its {:.0f} W limit; check `nvidia-smi -q -d POWER` "
                  "and whether an administrator lowered it",
                  *g.power_limit_w)
            : std::string(
                  "power: the board is at its power limit; check `nvidia-smi -q -d POWER`"));
  }
  if ((harmful & kHardware) != 0) {
    fixes.push_back(
        "hardware slowdown/power brake: an external signal (PSU, chassis temperature) is slowing the "
        "GPU; check the power supply and `nvidia-smi -q -d PERFORMANCE`");
  }
  c.fix = fmt::format("{}", fmt::join(fixes, "; "));
  return c;
}

Check pcie(const GpuFacts& g, const DoctorThresholds& th) {
  const std::string id = gpu_id(g, "pcie");
  if (!g.pcie.has_value()) {
    return skipped(id, "PCIe link not readable: " + g.pcie.missing_reason);
  }
  const PcieLink& l = *g.pcie;
  Check c{id, Status::Pass, {}, {}, {}};
  c.facts = {
      {"generation", l.generation},
      {"max_generation", l.max_generation},
      {"width", l.width},
      {"max_width", l.max_width},
      {"utilization_percent", fact(g.utilization_percent)}};
  c.summary = fmt::format(
      "PCIe gen {} x{} (max gen {} x{})",
      l.generation,
      l.width,
      l.max_generation,
      l.max_width);
  // The link drops to a lower generation when the GPU is idle to save power;
  // only under load does a low generation mean a badly trained link. The width
  // does not change with load.
  const bool idle =
      (g.throttle_reasons.value.value_or(0) & nvml::kThrottleGpuIdle) != 0 ||
      g.utilization_percent.value.value_or(0) <= th.busy_utilization_percent;
  std::vector<std::string> problems;
  if (l.width < l.max_width) {
    problems.push_back(
        fmt::format("link runs at x{} of x{} lanes", l.width, l.max_width));
  }
  if (l.generation < l.max_generation) {
    if (idle) {
      c.summary +=
          ": lower generation while idle is power saving; recheck under load";
    } else {
      problems.push_back(fmt::format(
          "gen {} of {} under load", l.generation, l.max_generation));
    }
  }
  if (!problems.empty()) {
    c.status = Status::Warn;
    c.summary += fmt::format(
        ": {} (host-to-device copies are slower)", fmt::join(problems, ", "));
    c.fix =
        "reseat the card in a full x16 slot, check risers and the BIOS PCIe settings (link speed, lane "
        "bifurcation); `nvidia-smi -q -d PCIE` shows the link";
  }
  if (l.max_generation > 0 && l.max_generation < 4) {
    c.summary += fmt::format(
        "; the slot's maximum gen {} is below the gen 4 the guides recommend",
        l.max_generation);
  }
  return c;
}

Check memory(
    const GpuFacts& g,
    unsigned int self_pid,
    bool host_pids,
    const DoctorThresholds& th) {
  const std::string id = gpu_id(g, "memory");
  if (!g.memory_total_bytes.has_value()) {
    return skipped(
        id, "memory not readable: " + g.memory_total_bytes.missing_reason);
  }
  const auto others = other_processes(g, self_pid, host_pids);
  const std::uint64_t total = *g.memory_total_bytes;
  const std::uint64_t free = g.memory_free_bytes.value.value_or(0);
  Check c{id, Status::Pass, {}, {}, {}};
  c.facts = {
      {"total_bytes", total},
      {"free_bytes", free},
      {"other_processes", others},
      {"processes", fact(g.processes)}};
  c.summary =
      fmt::format("{} free of {}", format_bytes(free), format_bytes(total));
  std::vector<std::string> listed;
  for (const auto& p : others) {
    listed.push_back(fmt::format(
        "pid {} {} ({})",
        p.pid,
        p.name.empty() ? "?" : p.name,
        p.used_bytes > 0 ? format_bytes(p.used_bytes) : "memory not reported"));
  }
  if (!listed.empty()) {
    c.summary += fmt::format(
        "; other processes on this GPU: {}", fmt::join(listed, ", "));
  } else if (!g.processes.has_value()) {
    c.summary +=
        " (process list not readable: " + g.processes.missing_reason + ")";
  }
  // Inside a container with its own PID namespace, NVML's pids are the
  // host's: `kill` here would hit another process, or none.
  const std::string stop = host_pids
      ? "stop those processes (`kill PID`)"
      : "stop those processes from the host (NVML's pids are the host's, not this container's)";
  const bool starved = static_cast<double>(free) <
      th.min_free_gpu_memory_fraction * static_cast<double>(total);
  if (starved) {
    c.status = Status::Fail;
    c.fix = listed.empty()
        ? "almost no GPU memory is free: find what holds it with `nvidia-smi` and stop it, or use another GPU"
        : stop +
            " or train on another GPU (CUDA_VISIBLE_DEVICES); a run here would fail with out-of-memory";
  } else if (!listed.empty()) {
    c.status = Status::Warn;
    c.fix =
        "other processes share this GPU's memory and compute: stop them, or pick a free GPU with "
        "CUDA_VISIBLE_DEVICES; hotloop's batch finder accounts for what they hold";
  }
  return c;
}

Check persistence(const GpuFacts& g) {
  const std::string id = gpu_id(g, "persistence");
  if (!g.persistence_mode.has_value()) {
    return skipped(
        id,
        "persistence mode not readable: " + g.persistence_mode.missing_reason);
  }
  Check c{
      id, Status::Pass, {}, {{"persistence_mode", *g.persistence_mode}}, {}};
  if (*g.persistence_mode) {
    c.summary = "persistence mode on";
  } else {
    c.status = Status::Warn;
    c.summary =
        "persistence mode off: the driver unloads between processes, adding seconds to each start";
    c.fix =
        "enable it: `sudo nvidia-smi -pm 1`, or run the nvidia-persistenced daemon";
  }
  return c;
}

Check mig(const GpuFacts& g) {
  const std::string id = gpu_id(g, "mig");
  if (!g.mig_enabled.has_value()) {
    return skipped(
        id,
        "MIG mode not readable: " + g.mig_enabled.missing_reason +
            " (GPUs before A100 have no MIG)");
  }
  Check c{id, Status::Pass, {}, {{"mig_enabled", *g.mig_enabled}}, {}};
  c.summary = *g.mig_enabled
      ? "MIG on: CUDA sees MIG instances, each a slice of this GPU's memory and compute"
      : "MIG off: the whole GPU is one device";
  return c;
}

} // namespace

std::optional<std::string> matching_arch(
    const std::string& arch_list,
    int major,
    int minor) {
  std::istringstream in(arch_list);
  std::string arch;
  std::optional<std::string> ptx_match;
  while (in >> arch) {
    // "sm_86" (machine code), "sm_90a" (this exact chip only), "compute_90"
    // (PTX, JIT-compiled by the driver)
    const bool is_sm = arch.rfind("sm_", 0) == 0;
    const bool is_ptx = arch.rfind("compute_", 0) == 0;
    if (!is_sm && !is_ptx) {
      continue;
    }
    std::string digits = arch.substr(is_sm ? 3 : 8);
    char suffix = 0;
    if (!digits.empty() &&
        std::isalpha(static_cast<unsigned char>(digits.back()))) {
      suffix = digits.back();
      digits.pop_back();
    }
    if (digits.size() < 2 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) {
          return std::isdigit(static_cast<unsigned char>(ch));
        })) {
      continue;
    }
    const int a_major = std::stoi(digits.substr(0, digits.size() - 1));
    const int a_minor = digits.back() - '0';
    if (is_sm) {
      // Machine code runs on the same major version with an equal or higher
      // minor; "a" code only on its own chip.
      const bool ok = suffix == 'a' ? (a_major == major && a_minor == minor)
                                    : (a_major == major && a_minor <= minor);
      if (ok) {
        return arch;
      }
    } else if (a_major * 10 + a_minor <= major * 10 + minor) {
      ptx_match = arch;
    }
  }
  return ptx_match;
}

void gpus(
    const DoctorFacts& f,
    const DoctorThresholds& th,
    std::vector<Check>& out) {
  for (const auto& g : f.nvml.gpus) {
    out.push_back(inventory(g));
    if (!g.name.has_value()) {
      continue; // no handle: nothing else can be read
    }
    out.push_back(arch(g, f.torch));
    out.push_back(thermal(g, th));
    out.push_back(throttle(g));
    out.push_back(pcie(g, th));
    out.push_back(memory(g, f.self_pid, f.host_pids, th));
    out.push_back(persistence(g));
    out.push_back(mig(g));
  }
}

} // namespace hotloop::env::checks
