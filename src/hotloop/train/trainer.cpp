// The training loop. Each optimizer step:
//   on_step_begin -> recovery.save -> lr = schedule(step)
//   -> step.run(state, lr)      (EagerStep | GraphStep: batches, forward,
//                                backward, the ranks' agreement, update)
//   -> out of memory: recovery.shrink, the same step again
//   -> on_step_end -> readback.record (on_loss, now or later)
//   -> evaluate / checkpoint when due
// then on_fit_end and summary.json. The parts live in their own files
// (trainer_parts.h lists them); this file is the order they run in.

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/train/cuda_graph_step.h"
#include "hotloop/train/readback.h"
#include "hotloop/train/schedule.h"
#include "hotloop/train/step_times.h"
#include "hotloop/train/trainer_parts.h"

namespace hotloop::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t peak_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024; // Linux: KiB
}

void write_json(const RunState& s, const char* name, const nlohmann::json& j) {
  if (s.rank == 0 && !s.run_dir.empty()) {
    std::ofstream(std::filesystem::path(s.run_dir) / name) << j.dump(2) << '\n';
  }
}

// config.json: the options as resolved, where each value came from, and the
// callbacks that observed the run.
nlohmann::json config_of(const TrainerOptions& o, const Events& events) {
  nlohmann::json j = o.to_json();
  j["sources"] = o.option_sources;
  nlohmann::json callbacks = nlohmann::json::array();
  for (const auto& c : events.callbacks()) {
    callbacks.push_back({{"name", c->name()}, {"config", c->config()}});
  }
  j["callbacks"] = callbacks;
  return j;
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
  s.stop = stop;
  write_json(s, "config.json", config_of(o, events));
  p.log(fmt::format(
      "train: {} on {} ({}), {} steps = {:.2f} epoch(s) of {} steps; batch {} = {} x {} micro-batch(es){}",
      o.model.name,
      s.device.str(),
      to_string(o.precision),
      s.total_steps,
      static_cast<double>(s.total_steps) /
          static_cast<double>(s.steps_per_epoch),
      s.steps_per_epoch,
      o.batch,
      s.accum_steps,
      s.micro_batch,
      s.world_size > 1 ? fmt::format(" x {} ranks", s.world_size)
                       : std::string()));
  if (!s.run_dir.empty()) {
    p.log(fmt::format("run directory: {}", s.run_dir));
  }

  // Resume: the position, and what the part before it leaves the summary.
  Readback readback(
      o.readback_every > 0 ? o.readback_every : (s.device.is_cuda() ? 16 : 1),
      o.clip_grad_norm > 0,
      p.precision->scales_loss());
  nlohmann::json before = nlohmann::json::object();
  nlohmann::json last_eval;
  if (const auto r = p.checkpointer->resume(s, *p.precision, s.log)) {
    s.step = r->step;
    s.epoch = r->epoch;
    s.next_batch = r->next_batch;
    s.resumed_at = r->step;
    before = r->progress;
    last_eval = r->last_eval;
    readback.set_recent_losses(
        before.value("recent_losses", std::vector<double>{}));
    p.recovery->set_recoveries(before.value("oom_recoveries", std::int64_t{0}));
    p.bad_samples_before += before.value("bad_samples", std::size_t{0});
    p.log(fmt::format(
        "resumed from {} at step {} (epoch {}, batch {})",
        r->path,
        s.step,
        s.epoch,
        s.next_batch));
  }
  if (s.device.is_cuda()) {
    cuda::reset_peak_memory(s.device.index());
  }
  events.fit_start(s);

  StepParts parts;
  parts.precision = p.precision.get();
  parts.readback = &readback;
  parts.events = &events;
  parts.sync = p.sync.get();
  parts.faults = &p.faults;
  parts.params = p.params;
  parts.tensors = p.tensors;
  parts.zero_norm =
      at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(s.device));
  std::unique_ptr<Step> step = make_step(s, std::move(parts), s.log);

  StepTimes times;
  auto progress = [&] {
    nlohmann::json j = times.count() > 0 ? times.progress(o.batch) : before;
    j["recent_losses"] = std::vector<double>(
        readback.recent_losses().begin(), readback.recent_losses().end());
    j["oom_recoveries"] = p.recovery->recoveries();
    j["bad_samples"] = p.bad_samples_before + p.loader->stats().bad_samples;
    return j;
  };
  auto checkpoint = [&] {
    const std::string path =
        p.checkpointer->save(s, *p.precision, progress(), last_eval);
    if (!path.empty()) {
      s.last_checkpoint = path;
      events.checkpoint(s, path);
    }
    return path;
  };
  std::optional<EvalResult> final_eval;
  auto evaluate = [&] {
    readback.drain(s, events);
    events.phase(s, Phase::Evaluation);
    const EvalResult r = p.evaluator->run(s, *p.precision, s.log);
    events.evaluation(s, r);
    last_eval = {{"step", s.step}, {"result", r.to_json()}};
    return r;
  };

  s.model->train();
  // Micro-batches per epoch: OOM recovery changes it.
  auto batches_per_epoch = [&s] {
    return static_cast<std::size_t>(s.steps_per_epoch * s.accum_steps);
  };
  if (s.next_batch + static_cast<std::size_t>(s.accum_steps) >
          p.loader->batches_per_epoch() ||
      s.next_batch >= batches_per_epoch()) {
    ++s.epoch;
    s.next_batch = 0;
  }
  p.loader->start_epoch(s.epoch, s.next_batch);
  bool stopped_early = false;
  while (s.step < s.total_steps) {
    if (s.next_batch >= batches_per_epoch()) {
      ++s.epoch;
      s.next_batch = 0;
      p.loader->start_epoch(s.epoch, 0);
    }
    const Clock::time_point t0 = Clock::now();
    p.recovery->save(s);
    events.step_begin(s);
    const double lr = learning_rate(
        o.schedule,
        s.step - p.precision->scaler().skipped_steps(),
        s.total_steps);
    StepResult r;
    try {
      r = step->run(s, lr);
    } catch (const StepFailure& f) {
      s.optimizer->zero_grad();
      const std::string saved = checkpoint(); // the last good state
      throw Error(
          f.name_checkpoint()
              ? fmt::format(
                    "{}; the last good state is in {}",
                    f.what(),
                    saved.empty() ? std::string("rank 0's checkpoint") : saved)
              : std::string(f.what()),
          f.fix());
    }
    if (r.out_of_memory) {
      // The same samples again, in smaller micro-batches.
      const OomRecovery::Plan plan = p.recovery->shrink(s, *r.out_of_memory);
      p.log(plan.message);
      const std::size_t samples =
          s.next_batch * static_cast<std::size_t>(s.micro_batch);
      s.micro_batch = plan.micro_batch;
      s.accum_steps = plan.accum_steps;
      p.make_loader();
      s.next_batch = samples / static_cast<std::size_t>(s.micro_batch);
      p.loader->start_epoch(s.epoch, s.next_batch);
      events.oom_recovery(
          s,
          {s.step + 1,
           s.micro_batch,
           s.accum_steps,
           *r.out_of_memory,
           plan.report_path});
      step->plan_changed(s);
      continue;
    }
    s.next_batch += r.batches_taken;
    ++s.step;
    const double dt = seconds_since(t0);
    times.add(dt, r.data_wait);
    events.step_end(
        s,
        {r.lr,
         dt,
         r.data_wait,
         o.batch,
         r.skipped,
         p.precision->scales_loss() ? p.precision->scaler().current_scale()
                                    : 0.0});
    readback.record(s, r.loss_value, r.loss, r.grad_norm, events);

    const bool epoch_end = s.step % s.steps_per_epoch == 0;
    const bool last = s.step == s.total_steps;
    if (p.evaluator->has_data() && s.rank == 0 &&
        (last || (o.eval_every > 0 ? s.step % o.eval_every == 0 : epoch_end))) {
      const EvalResult e = evaluate();
      if (last) {
        final_eval = e;
      }
    }
    if (last || r.stop ||
        (o.checkpoint_every > 0 ? s.step % o.checkpoint_every == 0
                                : epoch_end)) {
      readback.drain(s, events); // a non-finite loss stops before it
      events.phase(s, Phase::Checkpoint);
      checkpoint();
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
  readback.drain(s, events);

  TrainSummary sum;
  if (!final_eval && s.step == s.total_steps && s.rank == 0 &&
      p.evaluator->has_data()) {
    // Resumed after the last step: the evaluation the checkpoint holds, or,
    // when it has none, one now.
    if (!last_eval.is_null() &&
        last_eval.value("step", std::int64_t{-1}) == s.step) {
      final_eval = EvalResult::from_json(last_eval["result"]);
      sum.from_before_resume = {"val_loss", "val_accuracy"};
    } else {
      final_eval = evaluate();
    }
  }
  events.phase(s, Phase::Finished);
  sum.steps = s.step;
  sum.epochs =
      static_cast<double>(s.step) / static_cast<double>(s.steps_per_epoch);
  sum.train_loss = readback.train_loss();
  sum.eval = final_eval;
  times.fill(sum, o.batch, before);
  if (s.resumed_at >= 0 && s.step - s.resumed_at < 50 && s.step > 0) {
    sum.from_before_resume.emplace_back("train_loss");
  }
  if (s.device.is_cuda()) {
    const cuda::MemoryStats m = cuda::memory_stats(s.device.index());
    sum.peak_allocated_bytes = m.peak_allocated;
    sum.peak_reserved_bytes = m.peak_reserved;
  }
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.skipped_steps = p.precision->scaler().skipped_steps();
  sum.micro_batch = s.micro_batch;
  sum.accum_steps = s.accum_steps;
  sum.oom_recoveries = p.recovery->recoveries();
  sum.bad_samples = p.bad_samples_before + p.loader->stats().bad_samples;
  sum.device = s.device.str();
  sum.precision = to_string(o.precision);
  sum.graph_replays = step->graph_replays();
  sum.graph_off_reason = step->graph_off_reason();
  step.reset(); // a graph's stream and pool go before the summary's wait
  sum.stopped_early = stopped_early;
  sum.last_checkpoint = s.last_checkpoint;
  sum.resumed_at = s.resumed_at;
  sum.wall_s = seconds_since(start);
  sum.callbacks = events.fit_end(s, sum);
  write_json(s, "summary.json", sum.to_json());
  return sum;
}

EvalResult Trainer::evaluate() {
  Impl& p = *impl_;
  return p.evaluator->run(p.state, *p.precision, p.state.log);
}

const TrainerOptions& Trainer::options() const {
  return impl_->options;
}

const std::string& Trainer::run_dir() const {
  return impl_->state.run_dir;
}

} // namespace hotloop::train
