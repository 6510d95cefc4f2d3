#include "hotloop/train/step_readback.h"

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

} // namespace hotloop::train
