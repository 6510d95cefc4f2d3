#include "hotloop/train/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::optional<std::int64_t> parse_count(std::string_view text) {
  std::int64_t n = -1;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size() || n < 0) {
    return std::nullopt;
  }
  return n;
}

// HOTLOOP_INJECT_OOM_UNIT=forward:U|backward:U.
std::optional<UnitFault> read_oom_unit() {
  const std::string text = env("HOTLOOP_INJECT_OOM_UNIT");
  if (text.empty()) {
    return std::nullopt;
  }
  const std::size_t colon = text.find(':');
  const std::string pass = text.substr(0, colon);
  const std::optional<std::int64_t> unit = colon == std::string::npos
      ? std::nullopt
      : parse_count(std::string_view(text).substr(colon + 1));
  if (!unit || (pass != "forward" && pass != "backward")) {
    throw UsageError(
        fmt::format(
            "HOTLOOP_INJECT_OOM_UNIT={}: expected forward:U or backward:U (a unit's number, from 0)",
            text),
        "unset it, or name the unit whose pass runs out of memory");
  }
  return UnitFault{pass == "backward", static_cast<std::size_t>(*unit)};
}

} // namespace

FaultInjection read_fault_injection() {
  FaultInjection f;
  const std::string oom = env("HOTLOOP_INJECT_OOM_ABOVE");
  const std::string only = env("HOTLOOP_INJECT_OOM_RANK");
  const std::string rank = env("RANK");
  const bool this_rank = only.empty() || only == (rank.empty() ? "0" : rank);
  if (const std::string whole = env("HOTLOOP_INJECT_OOM_WHOLE");
      !whole.empty() && whole != "0") {
    if (whole != "1") {
      throw UsageError(
          fmt::format("HOTLOOP_INJECT_OOM_WHOLE={}: expected 1", whole),
          "unset it, or set it to 1");
    }
    f.oom_whole = this_rank;
  }
  f.oom_unit = read_oom_unit();
  if (!oom.empty() && this_rank) {
    f.oom_above = parse_count(oom);
    if (!f.oom_above) {
      throw UsageError(
          fmt::format(
              "HOTLOOP_INJECT_OOM_ABOVE={}: expected a number of samples", oom),
          "unset it, or give the largest micro-batch that may run");
    }
  }
  const std::string overflow = env("HOTLOOP_INJECT_OVERFLOW_STEPS");
  for (std::size_t at = 0; !overflow.empty() && at <= overflow.size();) {
    const std::size_t comma = std::min(overflow.find(',', at), overflow.size());
    const auto n =
        parse_count(std::string_view(overflow).substr(at, comma - at));
    if (!n || *n < 1) {
      throw UsageError(
          fmt::format(
              "HOTLOOP_INJECT_OVERFLOW_STEPS={}: expected step numbers (1-based) separated by commas",
              overflow),
          "unset it, or give the steps whose gradients overflow: 3,4");
    }
    f.overflow_steps.push_back(*n);
    at = comma + 1;
  }
  const std::string kill = env("HOTLOOP_INJECT_KILL");
  if (!kill.empty()) {
    const std::size_t colon = kill.find(':');
    const std::string point = kill.substr(0, colon);
    const std::optional<std::int64_t> step = colon == std::string::npos
        ? std::optional<std::int64_t>(0)
        : parse_count(std::string_view(kill).substr(colon + 1));
    const bool needs_step = point == "step" || point == "checkpoint";
    if (point == "step") {
      f.kill = KillPoint::Step;
    } else if (point == "checkpoint") {
      f.kill = KillPoint::Checkpoint;
    } else if (point == "final-checkpoint") {
      f.kill = KillPoint::FinalCheckpoint;
    } else if (point == "final-evaluation") {
      f.kill = KillPoint::FinalEvaluation;
    }
    if (f.kill == KillPoint::None || !step ||
        needs_step != (colon != std::string::npos)) {
      throw UsageError(
          fmt::format(
              "HOTLOOP_INJECT_KILL={}: expected step:N, checkpoint:N, final-checkpoint or final-evaluation",
              kill),
          "unset it");
    }
    f.kill_step = *step;
  }
  const std::string fake_graph = env("HOTLOOP_FAKE_CUDA_GRAPH");
  if (!fake_graph.empty() && fake_graph != "0") {
    if (fake_graph != "1") {
      throw UsageError(
          fmt::format(
              "HOTLOOP_FAKE_CUDA_GRAPH={}: expected 1 or 0", fake_graph),
          "unset it outside hotloop's tests");
    }
    f.fake_cuda_graph = true;
  }
  const std::string hang = env("HOTLOOP_INJECT_HANG");
  const std::string hang_rank = env("HOTLOOP_INJECT_HANG_RANK");
  if (!hang.empty() &&
      (hang_rank.empty() || hang_rank == (rank.empty() ? "0" : rank))) {
    f.hang_step = parse_count(hang);
    if (!f.hang_step) {
      throw UsageError(
          fmt::format("HOTLOOP_INJECT_HANG={}: expected a step number", hang),
          "unset it, or give the 1-based step to hang at");
    }
  }
  return f;
}

void FaultInjection::oom_if_whole() const {
  if (oom_whole) {
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "out of memory (injected by HOTLOOP_INJECT_OOM_WHOLE: the whole model does not fit this device)");
  }
}

void FaultInjection::oom_if_above(std::int64_t samples) const {
  if (!oom_unit && oom_above && samples > *oom_above) {
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "out of memory (injected: HOTLOOP_INJECT_OOM_ABOVE=",
        *oom_above,
        ", the micro-batch holds ",
        samples,
        " samples)");
  }
}

void FaultInjection::oom_in_unit(
    std::size_t unit,
    bool backward,
    std::int64_t samples) const {
  if (oom_unit && oom_unit->unit == unit && oom_unit->backward == backward &&
      oom_above && samples > *oom_above) {
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "out of memory (injected: HOTLOOP_INJECT_OOM_ABOVE=",
        *oom_above,
        " in unit ",
        unit,
        backward ? "'s backward" : "'s forward",
        ", the micro-batch holds ",
        samples,
        " samples)");
  }
}

bool FaultInjection::overflow_at(std::int64_t step) const {
  return std::find(overflow_steps.begin(), overflow_steps.end(), step) !=
      overflow_steps.end();
}

void FaultInjection::kill_at(KillPoint point, std::int64_t step) const {
  const bool counted =
      point == KillPoint::Step || point == KillPoint::Checkpoint;
  if (kill == point && (!counted || kill_step == step)) {
    ::raise(SIGKILL);
  }
}

void FaultInjection::hang_at(std::int64_t step) const {
  if (hang_step && *hang_step == step) {
    for (;;) {
      ::pause(); // until a signal ends the process
    }
  }
}

} // namespace hotloop::train
