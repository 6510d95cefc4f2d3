#include "hotloop/train/callbacks/console_log.h"

#include <cstdio>

#include <fmt/format.h>

namespace hotloop::train {

ConsoleLog::ConsoleLog(ConsoleOptions options) : options_(options) {}

void ConsoleLog::on_fit_start(const RunState& s) {
  talk_ = s.rank == 0;
  total_steps_ = s.total_steps;
  progress_ = std::make_unique<Progress>(
      "train",
      static_cast<std::uint64_t>(s.total_steps),
      talk_ && options_.progress_bar);
  last_line_ = std::chrono::steady_clock::now();
}

void ConsoleLog::print(const std::string& line) const {
  if (progress_ && options_.progress_bar) {
    // Clear the progress bar's line; its next update redraws it below.
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

// Model FLOP/s: as MFU where the device's peak is known, else achieved;
// "" when the model's FLOPs are unknown.
std::string ConsoleLog::flops_text(const RunState& s, const StepEnd& e) {
  if (s.flops_per_sample <= 0) {
    return "";
  }
  const double per_s =
      static_cast<double>(e.samples) * s.flops_per_sample / e.seconds;
  return s.peak_flops_per_s > 0
      ? fmt::format("  MFU {:.1f}%", 100 * per_s / s.peak_flops_per_s)
      : per_s >= 1e12 ? fmt::format("  {:.1f} TFLOP/s", per_s / 1e12)
                      : fmt::format("  {:.1f} GFLOP/s", per_s / 1e9);
}

std::string ConsoleLog::loss_text() const {
  return std::isnan(last_loss_) ? std::string("-")
                                : fmt::format("{:.4f}", last_loss_);
}

void ConsoleLog::on_step_end(const RunState& s, const StepEnd& e) {
  const std::int64_t tokens = s.model->tokens_per_sample();
  const double rate =
      static_cast<double>(e.samples * std::max<std::int64_t>(tokens, 1)) /
      e.seconds;
  unit_ = tokens > 0 ? "tok/s" : "img/s";
  if (progress_) {
    progress_->update(
        static_cast<std::uint64_t>(s.step),
        fmt::format(
            "loss {}  {:.0f} {}{}",
            loss_text(),
            rate,
            unit_,
            flops_text(s, e)));
  }
  const auto now = std::chrono::steady_clock::now();
  if (!options_.progress_bar && options_.log_every_s > 0 &&
      std::chrono::duration<double>(now - last_line_).count() >=
          options_.log_every_s) {
    last_line_ = now;
    due_.push_back({s.step, s.epoch, e.lr, rate, flops_text(s, e)});
  }
}

void ConsoleLog::on_loss(const RunState&, const StepLoss& l) {
  last_loss_ = l.loss;
  while (!due_.empty() && due_.front().step <= l.step) {
    const Due d = due_.front();
    due_.pop_front();
    if (!talk_) {
      continue;
    }
    print(fmt::format(
        "step {}/{}  epoch {}  loss {}  lr {:.3g}  {:.0f} {}{}",
        d.step,
        total_steps_,
        d.epoch,
        d.step == l.step ? fmt::format("{:.4f}", l.loss) : loss_text(),
        d.lr,
        d.rate,
        unit_,
        d.flops));
  }
}

void ConsoleLog::on_evaluation(const RunState& s, const EvalResult& r) {
  if (s.rank != 0) {
    return;
  }
  if (r.bits_per_byte || r.perplexity) {
    print(fmt::format(
        "step {}: val_loss {:.4f}  {}  next-token accuracy {:.2f}%",
        s.step,
        r.loss,
        r.bits_per_byte ? fmt::format("{:.3f} bits per byte", *r.bits_per_byte)
                        : fmt::format("perplexity {:.2f}", *r.perplexity),
        100 * r.accuracy));
    return;
  }
  print(fmt::format(
      "step {}: val_loss {:.4f}  val_accuracy {:.2f}%",
      s.step,
      r.loss,
      100 * r.accuracy));
}

void ConsoleLog::on_message(const RunState& s, const std::string& line) {
  if (s.rank == 0) {
    print(line);
  }
}

nlohmann::json ConsoleLog::on_fit_end(const RunState&, const TrainSummary&) {
  if (progress_) {
    progress_->finish();
  }
  return nullptr;
}

} // namespace hotloop::train
