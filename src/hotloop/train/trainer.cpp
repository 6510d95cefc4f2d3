// The training loop. Each optimizer step:
//   on_step_begin -> recovery.save -> lr = schedule(step)
//   -> step.run(state, lr)      (EagerStep | GraphStep: batches, forward,
//                                backward, the ranks' agreement, update)
//   -> out of memory: the same step again in smaller micro-batches
//   -> on_step_end -> readback.record (on_loss, now or later)
//   -> evaluate / checkpoint when due
// then on_fit_end and summary.json. The parts live in their own files
// (trainer_parts.h lists them; trainer_lifecycle.cpp has what the loop calls
// between steps); this file is the order they run in.

#include <chrono>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/train/schedule.h"
#include "hotloop/train/trainer_parts.h"

namespace hotloop::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

} // namespace

Trainer::Trainer(
    std::shared_ptr<model::Model> model,
    std::shared_ptr<const data::Dataset> train,
    std::shared_ptr<const data::Dataset> val,
    TrainerOptions options,
    TrainerContext context)
    : impl_(std::make_unique<Impl>(
          std::move(model),
          std::move(train),
          std::move(val),
          std::move(options),
          std::move(context))) {
  impl_->set_up();
}

Trainer::~Trainer() = default;

TrainSummary Trainer::fit(const std::atomic<bool>* stop) {
  Impl& p = *impl_;
  RunState& s = p.state;
  const TrainerOptions& o = p.options;
  Events& events = p.events;
  const Clock::time_point start = Clock::now();
  p.begin(stop);

  s.model->train();
  // Micro-batches per epoch (OOM recovery changes it).
  auto epoch_batches = [&s] {
    return static_cast<std::size_t>(s.steps_per_epoch * s.accum_steps);
  };
  if (s.next_batch + static_cast<std::size_t>(s.accum_steps) >
          p.loader->batches_per_epoch() ||
      s.next_batch >= epoch_batches()) {
    ++s.epoch;
    s.next_batch = 0;
  }
  p.loader->start_epoch(s.epoch, s.next_batch);
  bool stopped_early = false;
  while (s.step < s.total_steps) {
    if (s.next_batch >= epoch_batches()) {
      ++s.epoch;
      s.next_batch = 0;
      p.loader->start_epoch(s.epoch, 0);
    }
    const Clock::time_point t0 = Clock::now();
    p.recovery->save(s);
    events.step_begin(s);
    const double lr = learning_rate(
        o.schedule, s.step - p.precision->skipped_steps(), s.total_steps);
    StepResult r;
    p.times.begin_step();
    try {
      r = p.step->run(s, lr);
    } catch (const StepFailure& f) {
      p.fail(f);
    }
    if (r.out_of_memory) {
      p.redo_smaller(*r.out_of_memory);
      continue;
    }
    s.next_batch += r.batches_taken;
    ++s.step;
    const double dt = seconds_since(t0);
    p.times.add(dt, r.data_wait);
    events.step_end(
        s,
        {r.lr, dt, r.data_wait, o.batch, r.skipped, p.precision->loss_scale()});
    p.readback->record(s, r.loss_value, r.loss, r.grad_norm, events);

    const bool epoch_end = s.step % s.steps_per_epoch == 0;
    const bool last = s.step == s.total_steps;
    const bool evaluate = p.evaluator->has_data() &&
        (last || (o.eval_every > 0 ? s.step % o.eval_every == 0 : epoch_end));
    const bool save = last || r.stop ||
        (o.checkpoint_every > 0 ? s.step % o.checkpoint_every == 0 : epoch_end);
    // Stage 3: every rank evaluates (in step: each block gathered as it
    // runs), and a checkpoint reads the blocks one at a time.
    if (evaluate && (s.rank == 0 || p.unit_gather)) {
      p.evaluate();
    }
    if (save) {
      p.readback->drain(s, events); // a non-finite loss stops before it
      events.phase(s, Phase::Checkpoint);
      p.checkpoint();
      if (last) {
        p.faults.kill_at(KillPoint::FinalCheckpoint);
      }
    }
    if (r.stop && !last) {
      stopped_early = true;
      p.log(fmt::format(
          "stopped at step {}: checkpoint {}\nresume with: hotloop train ... --out {} --resume auto",
          s.step,
          s.last_checkpoint,
          s.run_dir));
      break;
    }
  }
  return p.finish(seconds_since(start), stopped_early);
}

EvalResult Trainer::evaluate() {
  Impl& p = *impl_;
  if (p.sharded_after_fit) {
    throw UsageError(
        "evaluate: the model stayed sharded after training (it does not fit one device whole), so its blocks hold no weights here",
        "evaluate the weights the run wrote (its model.safetensors) with a model on a device that holds them");
  }
  return p.evaluator->run(p.state, *p.precision, p.state.log);
}

const TrainerOptions& Trainer::options() const {
  return impl_->options;
}

const std::string& Trainer::run_dir() const {
  return impl_->state.run_dir;
}

} // namespace hotloop::train
