#include "hotloop/train/callbacks/profile_callback.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "hotloop/core/units.h"
#include "hotloop/errors.h"
#include "hotloop/train/run_state.h"

namespace hotloop::train {

namespace {

bool parse_step(std::string_view text, std::int64_t& out) {
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= 1;
}

// "A-B" or "N" -> (first, last); false when malformed.
bool parse_range(const std::string& text, std::int64_t& a, std::int64_t& b) {
  const std::size_t dash = text.find('-');
  if (dash == std::string::npos) {
    return parse_step(text, a) && (b = a, true);
  }
  return parse_step(std::string_view(text).substr(0, dash), a) &&
      parse_step(std::string_view(text).substr(dash + 1), b) && a <= b;
}

double median(std::deque<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

} // namespace

void ProfileOptions::validate() const {
  std::int64_t a = 0;
  std::int64_t b = 0;
  if (!steps.empty() && steps != "auto" && !parse_range(steps, a, b)) {
    throw UsageError(
        fmt::format("--profile {}: expected STEPS (A-B or N) or auto", steps),
        "for example --profile 100-105: steps 100 to 105, as the log numbers them");
  }
  if (auto_steps < 1 || slow_factor <= 1 || auto_every_s < 0) {
    throw UsageError(
        "profile: auto_steps >= 1, slow_factor > 1 and auto_every_s >= 0");
  }
}

ProfileCallback::ProfileCallback(ProfileOptions options, VerdictSource verdicts)
    : options_(std::move(options)), verdicts_(std::move(verdicts)) {
  options_.validate();
  is_auto_ = options_.steps == "auto";
  if (!is_auto_) {
    parse_range(options_.steps, first_, last_);
  }
}

ProfileCallback::~ProfileCallback() {
  // Ranges close before the recording they are in.
  phase_range_.reset();
  step_range_.reset();
}

nlohmann::json ProfileCallback::config() const {
  return {
      {"steps", options_.steps},
      {"auto_steps", options_.auto_steps},
      {"slow_factor", options_.slow_factor},
      {"auto_every_s", options_.auto_every_s},
      {"max_total_bytes", options_.max_total_bytes}};
}

void ProfileCallback::on_fit_start(const RunState& s) {
  if (s.run_dir.empty()) {
    s.log("profile: the run has no directory: no traces are written");
  }
  if (!is_auto_ && s.step >= last_) {
    s.log(fmt::format(
        "profile: steps {}-{} ran before this resumed at step {}: nothing to record",
        first_,
        last_,
        s.step));
  }
}

void ProfileCallback::start(
    const RunState& s,
    std::int64_t first,
    std::int64_t last) {
  telemetry::RecordingOptions o;
  o.cuda = s.device.is_cuda();
  recording_ = std::make_unique<telemetry::ProfileRecording>(o);
  current_ = Trace{first, last, current_.reason, {}};
}

void ProfileCallback::stop(const RunState& s) {
  const std::string path = s.run_dir.empty()
      ? std::string()
      : (std::filesystem::path(s.run_dir) / "profile" /
         fmt::format(
             "steps-{}-{}{}.pt.trace.json",
             current_.first,
             current_.last,
             s.world_size > 1 ? fmt::format("-rank{}", s.rank) : ""))
            .string();
  current_.summary = recording_->stop(path);
  recording_.reset();
  total_bytes_ += current_.summary.trace_bytes;
  if (!path.empty()) {
    s.log(fmt::format(
        "profile: steps {}-{}{} -> {} ({}; open it in https://ui.perfetto.dev or TensorBoard)",
        current_.first,
        current_.last,
        current_.reason.empty() ? "" : " (" + current_.reason + ")",
        path,
        format_bytes(current_.summary.trace_bytes)));
  }
  traces_.push_back(current_);
  current_ = {};
}

void ProfileCallback::on_step_begin(const RunState& s) {
  const std::int64_t step = s.step + 1;
  if (recording_ == nullptr) {
    if (!is_auto_ && step >= first_ && step <= last_) {
      start(s, step, last_);
    } else if (
        is_auto_ && pending_ && total_bytes_ < options_.max_total_bytes) {
      current_.reason = *pending_;
      pending_.reset();
      last_auto_s_ = clock_s_;
      start(s, step, step + options_.auto_steps - 1);
    }
  }
  if (recording_ != nullptr) {
    step_range_ =
        std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    step_name_ = fmt::format("hotloop::step {}", step);
    step_range_->before(step_name_, c10::ArrayRef<const c10::IValue>{});
  }
}

void ProfileCallback::on_phase(const RunState&, Phase p) {
  if (recording_ == nullptr) {
    return;
  }
  phase_range_.reset(); // a RecordFunction's destructor ends its range
  phase_range_ =
      std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  phase_name_ = fmt::format("hotloop::{}", to_string(p));
  phase_range_->before(phase_name_, c10::ArrayRef<const c10::IValue>{});
}

void ProfileCallback::on_step_end(const RunState& s, const StepEnd& e) {
  clock_s_ += e.seconds;
  phase_range_.reset(); // the step's ranges end with it
  step_range_.reset();
  if (recording_ != nullptr && s.step >= current_.last) {
    stop(s);
  }
  if (!is_auto_) {
    return;
  }
  // What would start an automatic recording of the next steps.
  std::optional<std::string> why;
  if (s.step > options_.warmup_steps && seconds_.size() >= 5) {
    const double m = median(seconds_);
    if (e.seconds > options_.slow_factor * m) {
      why = fmt::format(
          "step {} took {:.1f} ms, {:.1f}x the median {:.1f} ms",
          s.step,
          1e3 * e.seconds,
          e.seconds / m,
          1e3 * m);
    }
  }
  if (s.step > options_.warmup_steps) {
    seconds_.push_back(e.seconds);
    if (seconds_.size() > 200) {
      seconds_.pop_front();
    }
  }
  if (verdicts_) {
    if (const auto verdict = verdicts_()) {
      if (verdict_ == "healthy" && *verdict != "healthy" && !why) {
        why = fmt::format("the diagnosis turned {}", *verdict);
      }
      verdict_ = *verdict;
    }
  }
  const bool due =
      last_auto_s_ < 0 || clock_s_ - last_auto_s_ >= options_.auto_every_s;
  if (why && due && recording_ == nullptr && !pending_) {
    pending_ = why;
  }
}

nlohmann::json ProfileCallback::on_fit_end(
    const RunState& s,
    const TrainSummary&) {
  if (recording_ != nullptr) {
    current_.last = s.step; // the run ended inside the range
    stop(s);
  }
  nlohmann::json list = nlohmann::json::array();
  for (const Trace& t : traces_) {
    list.push_back(
        {{"steps", fmt::format("{}-{}", t.first, t.last)},
         {"reason", t.reason},
         {"path", t.summary.trace_path},
         {"bytes", t.summary.trace_bytes},
         {"events", t.summary.events},
         {"matmul_flops", t.summary.matmul_flops}});
  }
  return {{"traces", list}};
}

} // namespace hotloop::train
