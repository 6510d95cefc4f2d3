#include "hotloop/telemetry/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hotloop/core/units.h"
#include "hotloop/env/nvml_api.h"

namespace hotloop::telemetry {

namespace {

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    out += (out.empty() ? "" : ", ") + w;
  }
  return out;
}

// The slowing reasons in words, thermal first.
std::string slowing_words(std::uint64_t mask, bool& thermal, bool& power) {
  std::vector<std::string> words;
  thermal =
      (mask &
       (nvml::kThrottleSwThermalSlowdown | nvml::kThrottleHwThermalSlowdown)) !=
      0;
  power =
      (mask &
       (nvml::kThrottleSwPowerCap | nvml::kThrottleHwPowerBrakeSlowdown)) != 0;
  if ((mask & nvml::kThrottleHwThermalSlowdown) != 0) {
    words.emplace_back("hardware thermal slowdown");
  }
  if ((mask & nvml::kThrottleSwThermalSlowdown) != 0) {
    words.emplace_back("software thermal slowdown");
  }
  if ((mask & nvml::kThrottleSwPowerCap) != 0) {
    words.emplace_back("software power cap");
  }
  if ((mask & nvml::kThrottleHwPowerBrakeSlowdown) != 0) {
    words.emplace_back("hardware power brake");
  }
  if ((mask & nvml::kThrottleHwSlowdown) != 0) {
    words.emplace_back("hardware slowdown");
  }
  return join(words);
}

} // namespace

bool grows_steadily(
    const std::vector<std::uint64_t>& history,
    std::size_t windows,
    double growth) {
  if (history.size() <= windows) {
    return false;
  }
  for (std::size_t i = history.size() - windows; i < history.size(); ++i) {
    if (static_cast<double>(history[i]) <=
        static_cast<double>(history[i - 1]) * (1 + growth)) {
      return false;
    }
  }
  return true;
}

std::optional<Finding> throttle_finding(
    const GpuWindow& g,
    const std::string& where,
    const DiagnosisOptions& o) {
  if (g.slowing_mask == 0 || g.sm_clock_max == 0 ||
      g.sm_clock_mean >= o.clock_ratio * g.sm_clock_max) {
    return std::nullopt;
  }
  bool thermal = false;
  bool power = false;
  const std::string words = slowing_words(g.slowing_mask, thermal, power);
  std::string detail = fmt::format(
      "{}: {} in {} of {} samples; SM clock {:.0f} of {} MHz",
      where,
      words,
      g.slowed_samples,
      g.samples,
      g.sm_clock_mean,
      g.sm_clock_max);
  if (thermal && g.slowdown_temperature > 0) {
    detail += fmt::format(
        "; up to {} °C (slowdown at {} °C)",
        g.temperature_max,
        g.slowdown_temperature);
  }
  if (power && g.power_limit > 0) {
    detail += fmt::format("; {:.0f} of {:.0f} W", g.power_mean, g.power_limit);
  }
  return Finding{
      thermal ? "throttled-thermal" : (power ? "throttled-power" : "throttled"),
      detail,
      thermal
          ? "the GPU is too hot: check its airflow, fans and the room; nvidia-smi -q -d PERFORMANCE shows the reasons"
          : (power
                 ? "the GPU is held at its power limit: expected at full load on some parts; check nvidia-smi -q -d POWER for a lowered limit"
                 : "nvidia-smi -q -d PERFORMANCE shows why the clocks are held down")};
}

std::optional<Finding> other_process_finding(
    const std::vector<env::GpuProcess>& others,
    const std::string& where,
    const std::string& share) {
  if (others.empty()) {
    return std::nullopt;
  }
  std::vector<std::string> who;
  for (const auto& p : others) {
    who.push_back(fmt::format(
        "{} (pid {}, {})",
        p.name.empty() ? std::string("?") : p.name,
        p.pid,
        format_bytes(p.used_bytes)));
  }
  return Finding{
      "other-process",
      fmt::format("{}: also on this GPU: {}{}", where, join(who), share),
      "stop the other processes, or train on another GPU (CUDA_VISIBLE_DEVICES)"};
}

namespace {

// Most important first: what wastes the most, or will end the run.
int verdict_rank(const std::string& verdict) {
  for (int i = 0; const char* v :
                  {"cpu-with-gpu",
                   "memory-leak",
                   "input-bound",
                   "transfer-bound",
                   "straggler",
                   "throttled-thermal",
                   "throttled-power",
                   "throttled",
                   "other-process",
                   "under-used",
                   "launch-bound",
                   "memory-bound",
                   "tensor-idle",
                   // Last of the findings, first before healthy: the speed
                   // verdicts come first (a throughput run on synthetic
                   // data, whose labels are noise, never learns), and a
                   // run that does not learn is never called healthy.
                   "not-learning"}) {
    if (verdict == v) {
      return i;
    }
    ++i;
  }
  return 100;
}

// The phases' shares of a window, and its steps in words.
struct WindowShares {
  double wait = 0; // waiting for data
  double copy = 0; // host-to-device copies
  std::string steps; // "steps 100-200"
};

WindowShares shares_of(const WindowInput& w) {
  const double wall = w.wall_s > 0 ? w.wall_s : 1e-9;
  return {
      w.phases.data_wait / wall,
      w.phases.copy / wall,
      fmt::format("steps {}-{}", w.first_step, w.last_step)};
}

using Findings = std::vector<Finding>;

// Not learning: past the warm-up the loss is no better than a uniform guess,
// or above where the run started (diverged).
void learning(
    const WindowInput& w,
    const WindowShares& x,
    const DiagnosisOptions& o,
    Findings& out) {
  if (w.past_warmup && !std::isnan(w.loss_mean)) {
    const bool at_chance =
        w.chance_loss > 0 && w.loss_mean >= o.chance_share * w.chance_loss;
    const bool above_start =
        !std::isnan(w.first_loss_mean) && w.loss_mean > w.first_loss_mean;
    if (at_chance || above_start) {
      out.push_back(
          {"not-learning",
           fmt::format(
               "{}: after the warm-up the mean loss is {:.3f}, {}",
               x.steps,
               w.loss_mean,
               at_chance
                   ? fmt::format(
                         "{:.0f}% of a uniform guess's {:.3f}",
                         100 * w.loss_mean / w.chance_loss,
                         w.chance_loss)
                   : fmt::format(
                         "above the first window's {:.3f}", w.first_loss_mean)),
           "lower --lr (or drop --lr/--optimizer/--schedule to train with the model's recipe), add --warmup-steps or --clip-grad-norm, and check that labels match the images (hotloop smoke's overfit rung)"});
    }
  }
}

// The CPU while a GPU is there, a leak, the GPU's own conditions.
void placement_and_memory(
    const WindowInput& w,
    const WindowShares& x,
    const DiagnosisOptions& o,
    Findings& out) {
  if (!w.on_cuda && w.usable_gpu_present) {
    out.push_back(
        {"cpu-with-gpu",
         fmt::format(
             "{}: training runs on the CPU while CUDA can use a GPU", x.steps),
         "train with --device cuda (or auto); check that the model and batches are moved with it"});
  }

  // A real leak: allocated memory growing window after window. A large but
  // stable reserved-minus-allocated gap is the allocator's cache, not a leak.
  const auto& h = w.memory_history;
  if (grows_steadily(h, o.leak_windows, o.leak_growth)) {
    const std::uint64_t from = h[h.size() - 1 - o.leak_windows];
    out.push_back(
        {"memory-leak",
         fmt::format(
             "{}: {} grew in each of the last {} windows, {} -> {}",
             x.steps,
             w.memory_source,
             o.leak_windows,
             format_bytes(from),
             format_bytes(h.back())),
         "something keeps tensors from every step alive: accumulate losses with .item(), do not keep outputs or graphs in lists, detach what you log"});
  }
  if (w.gpu) {
    for (auto f :
         {throttle_finding(*w.gpu, x.steps, o),
          other_process_finding(w.gpu->other_processes, x.steps)}) {
      if (f) {
        out.push_back(std::move(*f));
      }
    }
  }
}

// Where the step's time went: waiting for data, copies, an idle GPU.
void phases(
    const WindowInput& w,
    const WindowShares& x,
    const DiagnosisOptions& o,
    Findings& out) {
  if (x.wait > o.input_bound) {
    out.push_back(
        {"input-bound",
         fmt::format(
             "{}: the step waited for data {:.0f}% of the time",
             x.steps,
             100 * x.wait),
         "more decode threads (--workers), --resident on for data that fits in memory, pack folders into shards (hotloop pack), --augment-device gpu"});
  }
  if (w.on_cuda && x.copy > o.transfer_bound) {
    out.push_back(
        {"transfer-bound",
         fmt::format(
             "{}: the GPU waited for host-to-device copies {:.0f}% of the time",
             x.steps,
             100 * x.copy),
         "keep pinned memory on, raise --prefetch, send uint8 batches (the loader does) or use --resident"});
  }
  if (w.on_cuda && w.gpu && w.gpu->util_mean < o.busy &&
      x.wait <= o.input_bound && x.copy <= o.transfer_bound) {
    out.push_back(
        {"under-used",
         fmt::format(
             "{}: the GPU was busy {:.0f}% of the time with little data wait ({:.0f}%)",
             x.steps,
             w.gpu->util_mean,
             100 * x.wait),
         "the kernels are too small to fill the GPU: a larger --batch (hotloop tune batch), bf16, channels-last; CUDA graphs cut launch overhead"});
  }
}

// What the SMs did (GPM counters, Hopper and later).
void sm_activity(
    const WindowInput& w,
    const WindowShares& x,
    const DiagnosisOptions& o,
    Findings& out) {
  if (w.on_cuda && w.gpu && w.gpu->gpm_samples > 0) {
    const GpuWindow& g = *w.gpu;
    if (g.util_mean >= 50 && g.sm_active_mean < o.launch_ratio * g.util_mean) {
      out.push_back(
          {"launch-bound",
           fmt::format(
               "{}: NVML's GPU utilization was {:.0f}% but the SMs were active {:.0f}% of the time: a kernel was running, yet most SMs sat idle",
               x.steps,
               g.util_mean,
               g.sm_active_mean),
           "kernels too small to fill the GPU, or gaps between launches: CUDA graphs (--cuda-graphs on), a larger --batch"});
    }
    if (g.dram_bw_mean >= o.dram_bound &&
        g.tensor_active_mean < 4 * o.tensor_idle) {
      out.push_back(
          {"memory-bound",
           fmt::format(
               "{}: DRAM bandwidth at {:.0f}% of its peak while the tensor cores ran {:.0f}% of the time",
               x.steps,
               g.dram_bw_mean,
               g.tensor_active_mean),
           "the step moves more bytes than it computes on: a larger --batch, bf16 (half the bytes), fused kernels and CUDA graphs"});
    }
    if (w.precision == "fp32" && g.sm_active_mean >= o.sm_busy &&
        g.tensor_active_mean < o.tensor_idle) {
      out.push_back(
          {"tensor-idle",
           fmt::format(
               "{}: the SMs were active {:.0f}% of the time but the tensor cores {:.1f}%, training in fp32",
               x.steps,
               g.sm_active_mean,
               g.tensor_active_mean),
           "fp32 math leaves the tensor cores idle: --precision bf16 (or tf32), and --channels-last for convolutions"});
    }
  }
}

// The slowest rank against the median of the others.
void straggler(
    const WindowInput& w,
    const WindowShares& x,
    const DiagnosisOptions& o,
    Findings& out) {
  if (w.ranks.size() > 1) {
    std::vector<RankWindow> r = w.ranks;
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) {
      return a.data_wait + a.compute < b.data_wait + b.compute;
    });
    const RankWindow& slow = r.back();
    const RankWindow& mid = r[(r.size() - 1) / 2];
    const double busy = slow.data_wait + slow.compute;
    const double typical = mid.data_wait + mid.compute;
    if (typical > 0 && busy > o.straggler * typical) {
      out.push_back(
          {"straggler",
           fmt::format(
               "{}: rank {} is busy {:.0f}% longer than the median rank (data wait {:.2f} s vs {:.2f} s, compute {:.2f} s vs {:.2f} s); every rank waits for it",
               x.steps,
               slow.rank,
               100 * (busy / typical - 1),
               slow.data_wait,
               mid.data_wait,
               slow.compute,
               mid.compute),
           slow.data_wait - mid.data_wait > slow.compute - mid.compute
               ? "its input is slower: check that node's disk and CPU load, raise --workers"
               : "its device is slower: hotloop monitor on that node (throttling, other processes)"});
    }
  }
}

// No finding: where the time goes.
Finding healthy(const WindowInput& w, const WindowShares& x) {
  if (w.on_cuda && w.gpu) {
    return {
        "healthy",
        fmt::format(
            "{}: the GPU was busy {:.0f}% of the time; data wait {:.0f}%",
            x.steps,
            w.gpu->util_mean,
            100 * x.wait),
        ""};
  }
  return {
      "healthy",
      fmt::format(
          "{}: data wait {:.0f}%; the time goes to the model's math{}",
          x.steps,
          100 * x.wait,
          w.on_cuda ? "" : " on the CPU"),
      ""};
}

} // namespace

Diagnosis diagnose(const WindowInput& w, const DiagnosisOptions& o) {
  const WindowShares x = shares_of(w);
  Diagnosis d;
  learning(w, x, o, d.findings);
  placement_and_memory(w, x, o, d.findings);
  phases(w, x, o, d.findings);
  sm_activity(w, x, o, d.findings);
  straggler(w, x, o, d.findings);
  std::stable_sort(
      d.findings.begin(), d.findings.end(), [](const auto& a, const auto& b) {
        return verdict_rank(a.verdict) < verdict_rank(b.verdict);
      });
  if (d.findings.empty()) {
    d.findings.push_back(healthy(w, x));
  }
  return d;
}

nlohmann::json to_json(const Diagnosis& d) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : d.findings) {
    findings.push_back(
        {{"verdict", f.verdict}, {"evidence", f.evidence}, {"fix", f.fix}});
  }
  return {{"verdict", d.primary().verdict}, {"findings", findings}};
}

} // namespace hotloop::telemetry
