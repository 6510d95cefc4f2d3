#include "hotloop/train/readback.h"

#include <cmath>
#include <numeric>

#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

StepReadback::StepReadback(std::int64_t every, std::size_t columns)
    : every_(every), columns_(columns) {
  if (every_ < 1 || columns_ < 1) {
    throw Error(fmt::format(
        "StepReadback: every ({}) and columns ({}) must be at least 1",
        every_,
        columns_));
  }
}

void StepReadback::record(
    std::int64_t step,
    const std::vector<at::Tensor>& values) {
  if (values.size() != columns_) {
    throw Error(fmt::format(
        "StepReadback: {} values for step {}, expected {}",
        values.size(),
        step,
        columns_));
  }
  const at::Tensor row = at::stack(values).to(at::kFloat);
  if (!buffer_.defined() || buffer_.device() != row.device()) {
    buffer_ = at::empty(
        {every_, static_cast<std::int64_t>(columns_)},
        row.options().dtype(at::kFloat));
  }
  buffer_.select(0, static_cast<std::int64_t>(kept_.size())).copy_(row);
  kept_.push_back(step);
  if (static_cast<std::int64_t>(kept_.size()) == every_) {
    flush();
  }
}

void StepReadback::flush() {
  if (kept_.empty()) {
    return;
  }
  // The copy is queued behind the kernels that wrote the rows; rows written
  // after it (the next steps) are queued behind the copy, so buffer_ can be
  // reused at once.
  const auto n = static_cast<std::int64_t>(kept_.size());
  in_flight_.push_back(
      {std::move(kept_), cuda::HostCopy(buffer_.narrow(0, 0, n))});
  kept_.clear();
}

void StepReadback::take(InFlight& f, std::vector<Row>& out) {
  const at::Tensor& host = f.copy.wait();
  const at::Tensor rows = host.contiguous();
  const float* p = rows.data_ptr<float>();
  const auto columns = static_cast<std::size_t>(rows.size(1));
  for (std::size_t i = 0; i < f.steps.size(); ++i) {
    Row r;
    r.step = f.steps[i];
    r.values.assign(p + i * columns, p + (i + 1) * columns);
    out.push_back(std::move(r));
  }
}

std::vector<StepReadback::Row> StepReadback::poll() {
  std::vector<Row> out;
  while (!in_flight_.empty() && in_flight_.front().copy.ready()) {
    take(in_flight_.front(), out);
    in_flight_.pop_front();
  }
  return out;
}

std::vector<StepReadback::Row> StepReadback::drain() {
  flush();
  std::vector<Row> out;
  while (!in_flight_.empty()) {
    take(in_flight_.front(), out);
    in_flight_.pop_front();
  }
  return out;
}

namespace {

constexpr std::size_t kRecent = 50; // train_loss: the mean of the last 50

} // namespace

Readback::Readback(std::int64_t every, bool grad_norms, bool skips_overflow)
    : every_(every),
      grad_norms_(grad_norms),
      skips_overflow_(skips_overflow),
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
    if (!std::isfinite(loss) && !skips_overflow_) {
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
