// What the loop (trainer.cpp) calls between its steps: the run's start
// (config.json, resume, the step chosen), OOM recovery applied, checkpoints,
// evaluation, failures, and the end (summary.json, report.html).

#include <algorithm>
#include <exception>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/lm/lora.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/weights.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "hotloop/train/graph_step.h"
#include "hotloop/train/host_memory.h"
#include "hotloop/train/run_figures.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/run_report.h"
#include "hotloop/train/trainer_parts.h"

namespace hotloop::train {

namespace {

// Rank 0 of a run with a folder writes its files.
bool writes_files(const RunState& s) {
  return s.rank == 0 && !s.run_dir.empty();
}

// config.json: the options as resolved, where each value came from, and the
// callbacks that observed the run.
nlohmann::json config_of(
    const TrainerOptions& o,
    const RunRecord& record,
    const Events& events) {
  nlohmann::json j = o.to_json();
  j["options"].update(record.options);
  j["sources"] = record.sources;
  nlohmann::json callbacks = nlohmann::json::array();
  for (const auto& c : events.callbacks()) {
    callbacks.push_back({{"name", c->name()}, {"config", c->config()}});
  }
  j["callbacks"] = callbacks;
  return j;
}

// RUN/adapter: the LoRA adapters as PEFT saves them, naming the base they
// adapt (--init, absolute, or the built-in size).
void write_adapter(const RunState& s, model::Model& model) {
  const TrainerOptions& o = *s.options;
  const std::string folder = model::model_kind(o.model.name).folder();
  auto absolute = [](const std::string& path) {
    return std::filesystem::absolute(path).lexically_normal().string();
  };
  const std::string base = !o.init.empty() ? absolute(o.init)
      : !folder.empty()                    ? absolute(folder)
                                           : o.model.name;
  if (o.init.empty()) {
    s.log(fmt::format(
        "lora: warning: the base was trained from scratch here (no --init): the adapter names {}, whose weights it was not trained on",
        base));
  }
  auto& lm = static_cast<model::LanguageModel&>(model);
  const std::string dir = RunFolder(s.run_dir).adapter();
  model::write_peft_adapter(
      dir, lm, o.model.lora, base, dynamic_cast<model::Gpt*>(&lm) != nullptr);
  s.log(fmt::format(
      "lora: the adapter is in {} (peft.PeftModel.from_pretrained reads it; hotloop weights merge-lora {} OUT writes the merged model)",
      dir,
      dir));
}

} // namespace

void Trainer::Impl::begin(const std::atomic<bool>* stop) {
  RunState& s = state;
  const TrainerOptions& o = options;
  s.stop = stop;
  if (writes_files(s)) {
    const RunFolder folder(s.run_dir);
    RunFolder::write_json(folder.config(), config_of(o, record, events));
    // The token data's tokenizer goes with the run: generate and predict on
    // its checkpoints decode with it.
    const auto* tokens =
        dynamic_cast<const data::TokenDataset*>(train_data.get());
    if (tokens != nullptr && !tokens->tokenizer_files().empty()) {
      folder.keep_tokenizer(tokens->tokenizer_files());
    }
  }
  log(fmt::format(
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
    log(fmt::format("run directory: {}", s.run_dir));
  }
  // Resume: the position, and what the part before it leaves the summary.
  // (Stage 3: each rank's shards of the blocks cut from a stage-3
  // checkpoint's shard files; whole weights go into the blocks one at a
  // time, each rank's shards taken from them.)
  const std::optional<Resumed> resumed = checkpointer->resume(
      s,
      *precision,
      s.log,
      unit_gather ? load_by_unit() : Checkpointer::ModelLoader());
  if (!o.resume.empty()) {
    // --offload optimizer: its host copies were made before the resume.
    optimizer->refresh_host_copies();
  }
  if (const auto& r = resumed) {
    s.step = r->step;
    s.epoch = r->epoch;
    s.next_batch = r->next_batch;
    s.resumed_at = r->step;
    before = r->progress;
    last_eval = r->last_eval;
    readback->set_recent_losses(
        before.value("recent_losses", std::vector<double>{}));
    recovery->set_recoveries(before.value("oom_recoveries", std::int64_t{0}));
    bad_samples_before += before.value("bad_samples", std::size_t{0});
    log(fmt::format(
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
  parts.precision = precision.get();
  parts.readback = readback.get();
  parts.events = &events;
  parts.sync = sync.get();
  if (sharded != nullptr) {
    parts.shard = unit_gather ? 3 : std::min(options.shard, 2);
  }
  parts.faults = &faults;
  parts.params = params;
  parts.tensors = tensors;
  parts.zero_norm =
      at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(s.device));
  if (sharded != nullptr) {
    parts.sum_over_ranks = [g = group](at::Tensor& t) {
      g->allreduce_sum_(t, "gradient norm");
    };
  }
  step = make_step(s, std::move(parts), s.log);
  if (s.device.is_cuda()) {
    // The host only queues a GPU step: its speed is timed on the stream.
    times.use_device_clock(std::make_unique<cuda::GpuTimer>(
        cuda::cuda_events(std::max<int>(0, s.device.index())), 1));
  }
}

void Trainer::Impl::redo_smaller(const std::string& error) {
  RunState& s = state;
  const OomRecovery::Plan plan = recovery->shrink(s, error);
  log(plan.message);
  const std::size_t samples =
      s.next_batch * static_cast<std::size_t>(s.micro_batch);
  s.micro_batch = plan.micro_batch;
  s.accum_steps = plan.accum_steps;
  make_loader();
  s.next_batch = samples / static_cast<std::size_t>(s.micro_batch);
  loader->start_epoch(s.epoch, s.next_batch);
  events.oom_recovery(
      s, {s.step + 1, s.micro_batch, s.accum_steps, error, plan.report_path});
  step->plan_changed(s);
}

Checkpointer::ModelLoader Trainer::Impl::load_by_unit() {
  return [this](const model::StateDict& weights, const model::LoadOptions& lo) {
    std::unordered_set<const c10::TensorImpl*> in_units;
    for (const at::Tensor& p : sharded->unit_params()) {
      in_units.insert(p.unsafeGetTensorImpl());
    }
    model::LoadOptions by_unit = lo;
    by_unit.defer = [&in_units](const at::Tensor& t) {
      return in_units.contains(t.unsafeGetTensorImpl());
    };
    // Checked whole, the rest loaded; the blocks' after, one at a time.
    const model::LoadReport report =
        model::load_state_dict(*model, weights, by_unit);
    std::unordered_map<const c10::TensorImpl*, const at::Tensor*> source;
    for (const auto& [target, from] : report.deferred) {
      source[target.unsafeGetTensorImpl()] = from;
    }
    sharded->each_unit_whole(
        [&](std::size_t, const std::vector<at::Tensor>& params) {
          at::NoGradGuard no_grad;
          for (const at::Tensor& p : params) {
            const auto it = source.find(p.unsafeGetTensorImpl());
            if (it != source.end()) {
              at::Tensor(p).copy_(*it->second);
            }
          }
        },
        /*written=*/true);
  };
}

std::string Trainer::Impl::checkpoint() {
  RunState& s = state;
  nlohmann::json progress =
      times.count() > 0 ? times.progress(options.batch) : before;
  progress["recent_losses"] = std::vector<double>(
      readback->recent_losses().begin(), readback->recent_losses().end());
  progress["oom_recoveries"] = recovery->recoveries();
  progress["bad_samples"] = bad_samples_before + loader->stats().bad_samples;
  const std::string path =
      checkpointer->save(s, *precision, progress, last_eval);
  if (!path.empty()) {
    s.last_checkpoint = path;
    events.checkpoint(s, path);
  }
  return path;
}

void Trainer::Impl::fail(const StepFailure& f) {
  state.optimizer->zero_grad();
  // The last good state; a sharded run's checkpoint is a collective, which
  // a rank failing alone cannot start.
  const std::string saved = sharded == nullptr ? checkpoint() : std::string();
  throw Error(
      f.name_checkpoint()
          ? fmt::format(
                "{}; the last good state is in {}",
                f.what(),
                saved.empty()
                    ? std::string(
                          sharded == nullptr ? "rank 0's checkpoint"
                                             : "the run's last checkpoint")
                    : saved)
          : std::string(f.what()),
      f.fix());
}

EvalResult Trainer::Impl::evaluate() {
  RunState& s = state;
  readback->drain(s, events);
  events.phase(s, Phase::Evaluation);
  const EvalResult r = evaluator->run(s, *precision, s.log);
  if (s.rank == 0) {
    events.evaluation(s, r); // stage 3 evaluates on every rank
  }
  last_eval = {{"step", s.step}, {"result", r.to_json()}};
  if (s.step == s.total_steps) {
    final_eval = r;
  }
  return r;
}

// What each rank holds of the model's training state at the update, by
// kind: every parameter (frozen ones too; --shard: the flat buffers, padding
// included; stage 3: the units' shards, and under "units" the largest unit
// and the most the units held whole at once), the gradients (one process: the
// parameters' own; plain data parallel: those and the all-reduce buckets;
// --shard: the reducer's buffers, the parameters' own freed) and the optimizer
// state (offloaded: none on the device; "host" what it keeps in host memory
// instead).
nlohmann::json Trainer::Impl::model_state_bytes() const {
  std::uint64_t parameters = 0;
  std::uint64_t trainable = 0;
  for (const at::Tensor& p : model->parameters()) {
    parameters += p.nbytes();
    trainable += p.requires_grad() ? p.nbytes() : 0;
  }
  std::uint64_t gradients = group ? 2 * trainable : trainable;
  nlohmann::json units;
  nlohmann::json reducing;
  if (sharded != nullptr) {
    const parallel::ShardedBytes b = sharded->bytes();
    parameters += b.parameters - trainable;
    gradients = b.gradients;
    if (sharded->unit_count() > 0) {
      units = {{"largest", b.largest_unit}, {"peak_whole", b.peak_units}};
    }
    if (sharded->stage() >= 2) {
      reducing = {
          {"largest_bucket", b.largest_bucket},
          {"peak_whole", b.peak_reducing}};
    }
  }
  std::uint64_t optimizer_state = 0;
  for (const auto& [name, t] : optimizer->state()) {
    optimizer_state += name == "steps" ? 0 : t.nbytes();
  }
  if (!optimizer->offloaded()) {
    nlohmann::json out = {
        {"parameters", parameters},
        {"gradients", gradients},
        {"optimizer", optimizer_state}};
    if (!units.is_null()) {
      out["units"] = units; // stage 3: a unit's parameters while it runs
    }
    if (!reducing.is_null()) {
      // Stages 2-3: whole gradient buffers while reduce-scattered.
      out["reduce_scatter"] = reducing;
    }
    return out;
  }
  // --offload optimizer: the state and the update's parameter copies (and
  // their gradients) are in host memory.
  std::uint64_t copies = 0;
  for (const ParamGroup& g : optimizer->groups()) {
    for (const at::Tensor& p : g.params) {
      copies += 2 * p.nbytes();
    }
  }
  nlohmann::json out = {
      {"parameters", parameters},
      {"gradients", gradients},
      {"optimizer", 0},
      {"host", optimizer_state + copies}};
  if (!reducing.is_null()) {
    out["reduce_scatter"] = reducing;
  }
  return out;
}

bool Trainer::Impl::whole_after_training() {
  if (!unit_gather) {
    return true;
  }
  unit_gather.reset(); // the hooks out of the model
  if (sharded->try_whole([this] { faults.oom_if_whole(); })) {
    return true;
  }
  sharded_after_fit = true;
  log(fmt::format(
      "shard: the model stays sharded after training: it does not fit one device whole on every rank{}",
      options.save_weights && !state.run_dir.empty()
          ? "; rank 0 writes its weights from host memory, a block at a time"
          : ""));
  return false;
}

void Trainer::Impl::write_final_weights(TrainSummary& sum, bool whole) {
  const RunState& s = state;
  const TrainerOptions& o = options;
  if (s.run_dir.empty() || !o.save_weights) {
    return;
  }
  // Sharded (stage 3, the model not whole): every rank takes part.
  const model::StateDict weights =
      whole ? model::state_dict(*model) : model_state_on_host();
  if (s.rank != 0) {
    return;
  }
  sum.weights = RunFolder(s.run_dir).weights();
  if (!o.model.lora.enabled()) {
    model::write_weights(sum.weights, weights);
    return;
  }
  // The adapters: the base is --init's (a bf16 run's copy is rounded).
  model::StateDict adapters;
  for (const auto& [name, t] :
       model::lora_state(static_cast<model::LanguageModel&>(*model))) {
    for (const auto& [from, value] : weights) {
      if (from == name) {
        adapters.emplace_back(name, value);
      }
    }
  }
  model::write_weights(sum.weights, adapters);
  if (whole) {
    write_adapter(s, *model);
  } else {
    log(fmt::format(
        "lora: the PEFT adapter folder is not written (the model stays sharded); {} holds the adapters",
        sum.weights));
  }
}

model::StateDict Trainer::Impl::model_state_on_host() {
  const bool keep = state.rank == 0;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> copies;
  // A copy that fails (host memory) fails this rank after the loop: the
  // other ranks' gathers of the later units still need it.
  std::exception_ptr failed;
  sharded->each_unit_whole(
      [&](std::size_t, const std::vector<at::Tensor>& params) {
        if (!keep || failed) {
          return;
        }
        try {
          for (const at::Tensor& p : params) {
            copies[p.unsafeGetTensorImpl()] =
                p.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
          }
        } catch (...) {
          failed = std::current_exception();
        }
      });
  if (failed) {
    std::rethrow_exception(failed);
  }
  model::StateDict out = model::state_dict(*model);
  for (auto& [name, t] : out) {
    const auto it = copies.find(t.unsafeGetTensorImpl());
    if (it != copies.end()) {
      t = it->second;
    }
  }
  return out;
}

TrainSummary Trainer::Impl::finish(double wall_s, bool stopped_early) {
  RunState& s = state;
  const TrainerOptions& o = options;
  readback->drain(s, events);
  TrainSummary sum;
  // Stage 3 evaluates on every rank, through the blocks' hooks.
  if (!final_eval && s.step == s.total_steps && (s.rank == 0 || unit_gather) &&
      evaluator->has_data()) {
    // Resumed after the last step: the evaluation its checkpoint holds, or,
    // when it has none, one now.
    if (!last_eval.is_null() &&
        last_eval.value("step", std::int64_t{-1}) == s.step) {
      final_eval = EvalResult::from_json(last_eval["result"]);
      sum.from_before_resume = {"val_loss", "val_accuracy"};
    } else {
      evaluate();
    }
  }
  events.phase(s, Phase::Finished);
  sum.steps = s.step;
  sum.epochs =
      static_cast<double>(s.step) / static_cast<double>(s.steps_per_epoch);
  sum.train_loss = readback->train_loss();
  sum.eval = final_eval;
  times.fill(sum, o.batch, before);
  fill_model_flops(sum, s);
  if (s.resumed_at >= 0 && s.step > 0 && s.step - s.resumed_at < 50) {
    sum.from_before_resume.emplace_back("train_loss"); // the last 50 steps'
  }
  if (s.device.is_cuda()) {
    const cuda::MemoryStats m = cuda::memory_stats(s.device.index());
    sum.peak_allocated_bytes = m.peak_allocated;
    sum.peak_reserved_bytes = m.peak_reserved;
  } else if (host_memory_counted()) {
    sum.peak_allocated_bytes = host_memory_stats().peak_allocated;
  }
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.skipped_steps = precision->skipped_steps();
  sum.shard = sharded != nullptr ? options.shard : 0;
  sum.model_state_bytes = model_state_bytes();
  sum.micro_batch = s.micro_batch;
  sum.accum_steps = s.accum_steps;
  sum.oom_recoveries = recovery->recoveries();
  sum.bad_samples = bad_samples_before + loader->stats().bad_samples;
  sum.device = s.device.str();
  sum.precision = to_string(o.precision);
  sum.graph_replays = step->graph_replays();
  sum.graph_off_reason = step->graph_off_reason();
  sum.graph_capture_out_of_memory = step->graph_capture_out_of_memory();
  step.reset(); // a graph's stream and pool go first
  sum.stopped_early = stopped_early;
  sum.last_checkpoint = s.last_checkpoint;
  sum.resumed_at = s.resumed_at;
  sum.wall_s = wall_s;
  write_final_weights(sum, whole_after_training());
  sum.callbacks = events.fit_end(s, sum);
  if (writes_files(s)) {
    RunFolder::write_json(RunFolder(s.run_dir).summary(), sum.to_json());
    try {
      write_run_report(s.run_dir); // report.html, from the files just written
    } catch (const std::exception& e) {
      // The run is done and its files are there: a page less is not a failure.
      log(fmt::format("report.html not written: {}", e.what()));
    }
  }
  return sum;
}

} // namespace hotloop::train
