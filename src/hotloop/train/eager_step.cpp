#include "hotloop/train/eager_step.h"

#include <cmath>
#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/errors.h"
#include "hotloop/train/loss_scaler.h"
#include "hotloop/train/optimizer.h"

namespace hotloop::train {

EagerStep::EagerStep(StepParts parts, std::string off_reason)
    : parts_(std::move(parts)), off_reason_(std::move(off_reason)) {}

data::Batch EagerStep::take_batch(
    const RunState& s,
    std::size_t taken,
    StepResult& r) {
  parts_.events->phase(s, Phase::Data);
  std::optional<data::Batch> b = s.batches->next();
  r.data_wait += s.batches->last_wait_seconds();
  if (!b) {
    throw Error(fmt::format(
        "the loader ended epoch {} at batch {}, before the {} batches an epoch should have",
        s.epoch,
        s.next_batch + taken,
        s.steps_per_epoch * s.accum_steps));
  }
  ++r.batches_taken;
  return std::move(*b);
}

void EagerStep::check_devices_once(
    const RunState& s,
    const data::Batch& batch) {
  if (!checked_) {
    check_devices(s, batch);
    checked_ = true;
  }
}

StepResult EagerStep::run(const RunState& s, double lr) {
  const TrainerOptions& o = *s.options;
  Events& events = *parts_.events;
  StepResult r;
  std::optional<data::Batch> first;
  try {
    for (std::int64_t a = 0; a < s.accum_steps; ++a) {
      data::Batch b = take_batch(s, static_cast<std::size_t>(a), r);
      const at::Tensor images = o.channels_last && b.images.dim() == 4
          ? b.images.contiguous(at::MemoryFormat::ChannelsLast)
          : b.images;
      events.phase(s, Phase::Forward);
      at::Tensor logits;
      {
        const AutocastScope autocast = parts_.precision->autocast();
        logits = s.model->forward(images);
      }
      const at::Tensor loss =
          s.model->loss(logits, b.labels, {o.label_smoothing});
      events.phase(s, Phase::Backward);
      const bool last = a == s.accum_steps - 1;
      if (parts_.sync != nullptr && last) {
        parts_.sync->arm(); // the final gradients: buckets start in backward
      }
      parts_.precision->scale(loss / static_cast<double>(s.accum_steps))
          .backward();
      parts_.faults->oom_if_above(images.size(0));
      if (last) {
        parts_.faults->kill_at(KillPoint::Step, s.step + 1);
        parts_.faults->hang_at(s.step + 1);
      }
      if (last && parts_.faults->overflow_at(s.step + 1)) {
        at::NoGradGuard no_grad;
        parts_.tensors.front().mutable_grad().fill_(
            std::numeric_limits<float>::infinity());
      }
      const at::Tensor l = loss.detach() / static_cast<double>(s.accum_steps);
      r.loss = r.loss.defined() ? r.loss + l : l;
      if (!first) {
        first = std::move(b);
      }
    }
  } catch (const c10::OutOfMemoryError& e) {
    r.out_of_memory = first_line(e.what());
  }

  bool stop = s.stop_requested();
  if (r.out_of_memory && !o.oom_recovery) {
    r.stop = stop; // the loop stops the run before any collective
    return r;
  }
  if (parts_.sync != nullptr) {
    events.phase(s, Phase::AllReduce);
    const StepSync::Agreement agreed =
        parts_.sync->agree(r.out_of_memory.has_value(), stop);
    if (agreed.out_of_memory && !r.out_of_memory) {
      r.out_of_memory = "out of memory on another rank";
    }
    stop = agreed.stop;
  }
  r.stop = stop;
  if (r.out_of_memory) {
    if (parts_.sync != nullptr) {
      parts_.sync->discard();
    }
    return r;
  }
  if (parts_.sync != nullptr) {
    parts_.sync->finish(); // the mean gradients
  }

  events.phase(s, Phase::Optimizer);
  if (parts_.readback->before_update()) {
    r.loss_value = r.loss.item<double>();
  }
  r.skipped = parts_.precision->unscale_and_check(
      parts_.params, parts_.tensors, s.step + 1);
  if (!parts_.precision->skips_overflow() && r.loss_value &&
      !std::isfinite(*r.loss_value)) {
    const std::string bad = first_non_finite_gradient(parts_.params);
    throw StepFailure(
        fmt::format(
            "step {}: the loss is {} (first non-finite gradient: {})",
            s.step + 1,
            *r.loss_value,
            bad.empty() ? std::string("none") : bad),
        "lower the learning rate, add --clip-grad-norm or --warmup-steps, and check the data for bad labels",
        true);
  }
  r.grad_norm = parts_.zero_norm;
  if (!r.skipped) {
    events.gradients(s);
    if (o.clip_grad_value > 0) {
      clip_gradient_values(parts_.params, o.clip_grad_value);
    }
    if (o.clip_grad_norm > 0) {
      r.grad_norm =
          clip_gradients(parts_.params, o.clip_grad_norm, parts_.zero_norm);
    }
    s.optimizer->step(lr);
    r.lr = lr;
  }
  check_devices_once(s, *first);
  s.optimizer->zero_grad();
  return r;
}

} // namespace hotloop::train
