#include "hotloop/train/eager_step.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/errors.h"
#include "hotloop/train/batch_for_model.h"
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

double EagerStep::step_divisor(const RunState& s, const data::Batch& first)
    const {
  // One micro-batch on one rank knows its count before backward: the
  // gradients need no rescaling. Else each micro-batch is weighed against a
  // full step of the planned micro-batch (the same on every rank, whatever
  // a batch short of a bad sample holds), and per_trained_token corrects
  // for the counts the step really had.
  if (s.accum_steps == 1 && parts_.sync == nullptr) {
    return static_cast<double>(std::max<std::int64_t>(first.targets(), 1));
  }
  const std::int64_t samples = std::max<std::int64_t>(first.labels.size(0), 1);
  const std::int64_t per_sample = first.labels.numel() / samples;
  return static_cast<double>(
      std::max<std::int64_t>(per_sample * s.micro_batch * s.accum_steps, 1));
}

void EagerStep::per_trained_token(const TargetCount& t, StepResult& r) const {
  const double trained =
      static_cast<double>(std::max<std::int64_t>(t.global, 1));
  // The gradients: a mean over ranks of sums over `divisor` each, to a sum
  // over every rank's trained targets. 1 (no pass) when every micro-batch
  // trained all its labels.
  const double factor = t.divisor * t.ranks / trained;
  if (factor != 1.0) {
    scale_gradients(parts_.params, factor);
  }
  // The loss: this rank's, per its own trained target.
  const double local = static_cast<double>(std::max<std::int64_t>(t.local, 1));
  if (t.divisor != local) {
    r.loss = r.loss * (t.divisor / local);
  }
}

// The update: clipping (the global norm), the optimizer, and under --shard
// the gathered parameters; nothing when loss scaling skips the step.
void EagerStep::update(const RunState& s, double lr, StepResult& r) {
  const TrainerOptions& o = *s.options;
  r.grad_norm = parts_.zero_norm;
  if (!r.skipped) {
    parts_.events->gradients(s);
    if (o.clip_grad_value > 0) {
      clip_gradient_values(parts_.params, o.clip_grad_value);
    }
    if (o.clip_grad_norm > 0) {
      r.grad_norm = clip_gradients(
          parts_.params,
          o.clip_grad_norm,
          parts_.zero_norm,
          parts_.sum_over_ranks);
    }
    s.optimizer->step(lr);
    if (parts_.sync != nullptr) {
      parts_.sync->after_update(); // ZeRO: every rank's shard gathered
    }
    r.lr = lr;
  }
}

StepResult EagerStep::run(const RunState& s, double lr) {
  const TrainerOptions& o = *s.options;
  Events& events = *parts_.events;
  StepResult r;
  std::optional<data::Batch> first;
  TargetCount targets;
  if (parts_.sync != nullptr) {
    parts_.sync->begin_step(static_cast<std::size_t>(s.accum_steps));
  }
  try {
    for (std::int64_t a = 0; a < s.accum_steps; ++a) {
      data::Batch b = take_batch(s, static_cast<std::size_t>(a), r);
      const std::int64_t n = b.targets();
      if (a == 0) {
        targets.divisor = step_divisor(s, b);
      }
      targets.local += n;
      const at::Tensor images = o.channels_last && b.images.dim() == 4
          ? b.images.contiguous(at::MemoryFormat::ChannelsLast)
          : b.images;
      events.phase(s, Phase::Forward);
      // The mean over this micro-batch's n targets, weighed n / divisor:
      // its share of the step's tokens (exactly 1/accumulation when every
      // micro-batch trains as many).
      const double share =
          static_cast<double>(std::max<std::int64_t>(n, 1)) / targets.divisor;
      at::Tensor loss;
      {
        const AutocastScope autocast = parts_.precision->autocast();
        loss = s.model->objective(
                   batch_for_model(b, images), {o.label_smoothing}) *
            share;
      }
      events.phase(s, Phase::Backward);
      const bool last = a == s.accum_steps - 1;
      if (parts_.sync != nullptr && last) {
        parts_.sync->arm(); // the final gradients: buckets start in backward
      }
      parts_.precision->scale(loss).backward();
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
      r.loss = r.loss.defined() ? r.loss + loss.detach() : loss.detach();
      if (!first) {
        first = std::move(b);
      }
    }
  } catch (const c10::OutOfMemoryError& e) {
    r.out_of_memory = first_line(e.what());
  }

  bool stop = s.stop_requested();
  // Without recovery the loop stops the run on an OOM: a data-parallel rank
  // after the agreement (each then stops, naming it).
  if (r.out_of_memory && !o.oom_recovery && parts_.sync == nullptr) {
    r.stop = stop;
    return r;
  }
  if (parts_.sync != nullptr) {
    events.phase(s, Phase::AllReduce);
    const StepSync::Agreement agreed =
        parts_.sync->agree(r.out_of_memory.has_value(), stop, targets.local);
    targets.global = agreed.targets;
    targets.ranks = parts_.sync->world_size();
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
  } else {
    targets.global = targets.local;
  }
  per_trained_token(targets, r);

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
  update(s, lr, r);
  check_devices_once(s, *first);
  s.optimizer->zero_grad();
  return r;
}

} // namespace hotloop::train
