#include "hotloop/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

ScheduleKind parse_schedule(const std::string& text) {
  return parse_named<ScheduleKind>(kScheduleNames, text, "schedule");
}

const char* to_string(ScheduleKind kind) {
  return name_of<ScheduleKind>(kScheduleNames, kind);
}

namespace {

double cosine_between(double from, double to, double progress) {
  return to + (from - to) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

} // namespace

double learning_rate(
    const ScheduleOptions& o,
    std::int64_t step,
    std::int64_t total_steps) {
  total_steps = std::max<std::int64_t>(total_steps, 1);
  step = std::clamp<std::int64_t>(step, 0, total_steps - 1);
  if (o.kind == ScheduleKind::OneCycle) {
    // torch.optim.lr_scheduler.OneCycleLR with cosine annealing.
    const double start = o.lr / o.div_factor;
    const double end = start / o.final_div_factor;
    const double rise_end = o.pct_start * static_cast<double>(total_steps) - 1;
    const double s = static_cast<double>(step);
    if (s <= rise_end) {
      return cosine_between(start, o.lr, rise_end > 0 ? s / rise_end : 1.0);
    }
    const double fall = static_cast<double>(total_steps - 1) - rise_end;
    return cosine_between(o.lr, end, fall > 0 ? (s - rise_end) / fall : 1.0);
  }
  if (step < o.warmup_steps) {
    return o.lr * static_cast<double>(step + 1) /
        static_cast<double>(o.warmup_steps);
  }
  switch (o.kind) {
    case ScheduleKind::Constant:
      return o.lr;
    case ScheduleKind::Step:
      return o.step_size > 0
          ? o.lr *
              std::pow(
                  o.gamma,
                  static_cast<double>((step - o.warmup_steps) / o.step_size))
          : o.lr;
    case ScheduleKind::Cosine: {
      const double span = static_cast<double>(total_steps - o.warmup_steps);
      const double progress = span > 1
          ? static_cast<double>(step - o.warmup_steps) / (span - 1)
          : 1.0;
      return cosine_between(o.lr, o.min_lr, progress);
    }
    case ScheduleKind::OneCycle:
      break;
  }
  return o.lr;
}

std::int64_t warmup_end(const ScheduleOptions& o, std::int64_t total_steps) {
  if (o.kind == ScheduleKind::OneCycle) {
    return static_cast<std::int64_t>(
        o.pct_start * static_cast<double>(total_steps));
  }
  return o.warmup_steps;
}

} // namespace hotloop::train
