#include "hotloop/train/readback.h"

#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

namespace {

constexpr std::size_t kRecent = 50; // train_loss: the mean of the last 50

} // namespace

Readback::Readback(std::int64_t every, bool grad_norms, bool scaled)
    : every_(every),
      grad_norms_(grad_norms),
      scaled_(scaled),
      device_values_(std::make_unique<StepReadback>(every, 2)) {}

void Readback::record(
    const RunState& s,
    std::optional<double> value,
    const at::Tensor& loss,
    const at::Tensor& grad_norm,
    Events& events) {
  if (value) {
    // Read by the step before its update (which checked it).
    StepLoss l{s.step, *value, std::nullopt};
    if (grad_norms_) {
      l.grad_norm = grad_norm.item<double>();
    }
    deliver(s, l, events);
    return;
  }
  device_values_->record(s.step, {loss, grad_norm});
  take(
      every_ == 1 ? device_values_->drain() : device_values_->poll(),
      s,
      events);
}

void Readback::drain(const RunState& s, Events& events) {
  take(device_values_->drain(), s, events);
}

void Readback::take(
    const std::vector<StepReadback::Row>& rows,
    const RunState& s,
    Events& events) {
  for (const auto& row : rows) {
    const double loss = row.values[0];
    // With loss scaling an overflowing loss is the scaler's business (it
    // skips the step), not an error.
    if (!std::isfinite(loss) && !scaled_) {
      throw Error(
          fmt::format(
              "step {}: the loss is {} (read back at step {}: losses are read every {} steps, so the update was applied; the last good state is the newest checkpoint{})",
              row.step,
              loss,
              s.step,
              every_,
              s.last_checkpoint.empty() ? std::string()
                                        : ", " + s.last_checkpoint),
          "lower the learning rate, add --clip-grad-norm or --warmup-steps, and check the data for bad labels; --readback-every 1 stops before a non-finite loss is applied");
    }
    StepLoss l{row.step, loss, std::nullopt};
    if (grad_norms_) {
      l.grad_norm = row.values[1];
    }
    deliver(s, l, events);
  }
}

void Readback::deliver(const RunState& s, const StepLoss& l, Events& events) {
  recent_.push_back(l.loss);
  if (recent_.size() > kRecent) {
    recent_.pop_front();
  }
  events.loss(s, l);
}

double Readback::train_loss() const {
  return recent_.empty()
      ? 0
      : std::accumulate(recent_.begin(), recent_.end(), 0.0) /
          static_cast<double>(recent_.size());
}

void Readback::set_recent_losses(const std::vector<double>& losses) {
  recent_.assign(losses.begin(), losses.end());
  while (recent_.size() > kRecent) {
    recent_.pop_front();
  }
}

} // namespace hotloop::train
