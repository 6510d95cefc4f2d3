#include "hotloop/train/batch_finder.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/lm/lora.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/train/host_memory.h"
#include "hotloop/train/trainer.h"

namespace hotloop::train {

namespace {

using Clock = std::chrono::steady_clock;

int cuda_index(const std::string& device) {
  if (device == "auto" || device == "cuda") {
    return 0;
  }
  if (device.starts_with("cuda:")) {
    return std::stoi(device.substr(5));
  }
  return -1;
}

void release(int cuda) {
  if (cuda >= 0) {
    cuda::empty_cache();
    cuda::reset_peak_memory(cuda);
  }
  reset_host_memory_peak(); // where it is counted (host_memory.h)
}

int cuda_of(const std::string& device) {
  const bool on_cuda = device.starts_with("cuda") ||
      (device == "auto" && !cuda::state().devices.empty());
  return on_cuda ? cuda_index(device) : -1;
}

// One trial: `trial_steps` real training steps at micro-batch = batch =
// `size` (a rank's: sharded over `group` when given, the batch then `size`
// times its ranks). Everything it builds is gone when it returns.
BatchTrial run_trial(
    std::int64_t size,
    const ModelFactory& make_model,
    const std::shared_ptr<const data::Dataset>& train,
    const BatchFinderOptions& options,
    int cuda,
    const std::shared_ptr<parallel::ProcessGroup>& group) {
  TrainerOptions o = options.trainer;
  o.world_size = group ? group->size() : 1;
  o.rank = group ? group->rank() : 0;
  o.batch = size * o.world_size;
  o.micro_batch = size;
  o.steps = options.trial_steps;
  o.oom_recovery = false; // an OOM is the trial's answer
  o.resume.clear();
  o.out_dir.clear(); // no files
  // The run's own CUDA-graph setting: a captured step holds its activations
  // and gradients in the graph's pool, and the size found must fit that.
  BatchTrial t;
  t.size = size;
  release(cuda);
  const Clock::time_point start = Clock::now();
  try {
    // No callbacks: a trial neither logs nor samples.
    Trainer trainer(make_model(), train, nullptr, o, {Callbacks{}, group});
    const TrainSummary s = trainer.fit();
    // A capture that did not fit counts as not fitting: at this size the
    // run would train without its graph.
    t.ok = !s.graph_capture_out_of_memory;
    if (!t.ok) {
      t.note = "the CUDA-graph capture ran out of memory (eager would fit)";
    }
    t.images_per_s = s.images_per_s;
    t.tokens_per_s = s.tokens_per_s;
    // steps / epochs is the epoch's batches (a batch of `size` on each
    // rank, the last partial one dropped): exact at size 1.
    if (s.epochs > 0) {
      t.data_samples =
          o.batch * std::llround(static_cast<double>(s.steps) / s.epochs);
    }
    t.peak_allocated_bytes = s.peak_allocated_bytes;
    t.peak_reserved_bytes = s.peak_reserved_bytes;
  } catch (const std::exception& e) {
    // c10's out of memory, or the trainer's (the step's report) when it
    // found no smaller micro-batch: the trial is off. Sharded over a
    // group, only the trainer's: the ranks agreed on it in the step, while
    // one met elsewhere (building the model, the optimizer's first state)
    // is this rank's alone, which the others are not waiting to hear.
    const bool agreed = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr;
    const bool raw = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
    if (!agreed && (group || !raw)) {
      throw;
    }
    t.ok = false;
    if (cuda >= 0) {
      const cuda::MemoryStats m = cuda::memory_stats(cuda);
      t.peak_allocated_bytes = m.peak_allocated;
      t.peak_reserved_bytes = m.peak_reserved;
    } else {
      t.peak_allocated_bytes = host_memory_stats().peak_allocated;
    }
  }
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  release(cuda);
  return t;
}

} // namespace

std::string BatchTrial::rate() const {
  return tokens_per_s > 0 ? fmt::format("{:.0f} tokens/s", tokens_per_s)
                          : fmt::format("{:.0f} images/s", images_per_s);
}

nlohmann::json BatchFinderResult::to_json() const {
  nlohmann::json trial_list = nlohmann::json::array();
  for (const BatchTrial& t : trials) {
    nlohmann::json j = {
        {"size", t.size},
        {"result", t.ok ? "ok" : "oom"},
        {"note", t.note},
        {"images_per_s", t.images_per_s},
        {"peak_allocated_bytes", t.peak_allocated_bytes},
        {"peak_reserved_bytes", t.peak_reserved_bytes},
        {"seconds", t.seconds}};
    if (t.tokens_per_s > 0) {
      j["tokens_per_s"] = t.tokens_per_s;
    }
    trial_list.push_back(std::move(j));
  }
  return {
      {"max_batch", max_batch},
      {"reached_ceiling", reached_ceiling},
      {"recommended", recommended},
      {"reason", reason},
      {"device", device},
      {"memory_budget_bytes", memory_budget_bytes},
      {"model_state", state.to_json()},
      {"trials", trial_list}};
}

void recommend_batch_size(
    BatchFinderResult& r,
    const BatchFinderOptions& options) {
  std::vector<BatchTrial> fits;
  const bool measured = r.memory_budget_bytes > 0;
  const auto size_limit = static_cast<std::int64_t>(
      (1.0 - options.margin) * static_cast<double>(r.max_batch));
  for (const BatchTrial& t : r.trials) {
    const bool in_margin = measured
        ? t.peak_reserved_bytes <= r.memory_budget_bytes
        : (r.reached_ceiling || t.size <= size_limit);
    if (t.ok && in_margin) {
      fits.push_back(t);
    }
  }
  std::sort(fits.begin(), fits.end(), [](const auto& a, const auto& b) {
    return a.size < b.size;
  });
  // "the largest size <margin_words>"
  const std::string margin_words = measured
      ? fmt::format(
            "whose peak reserved memory stays within {} ({:.0f}% margin)",
            format_bytes(r.memory_budget_bytes),
            100 * options.margin)
      : (r.reached_ceiling
             ? std::string("tried (none ran out of memory)")
             : fmt::format(
                   "of at most {} ({:.0f}% under the largest that fits; the CPU's memory is not measured)",
                   size_limit,
                   100 * options.margin));
  if (fits.empty()) {
    if (r.max_batch > 0) {
      // Nothing keeps the margin: the smallest size that ran, said plainly.
      for (const BatchTrial& t : r.trials) {
        if (t.ok && (r.recommended == 0 || t.size < r.recommended)) {
          r.recommended = t.size;
        }
      }
      r.reason = fmt::format(
          "no size keeps the margin ({}); {} is the smallest that ran: expect little headroom",
          margin_words,
          r.recommended);
    } else {
      r.reason =
          "not even one sample fits: use --precision bf16, --activation-checkpointing stages, a smaller --size or model";
    }
    return;
  }
  const BatchTrial* best = &fits.front();
  for (const BatchTrial& t : fits) {
    if (t.images_per_s > best->images_per_s * (1 + options.speed_tolerance)) {
      best = &t;
    }
  }
  r.recommended = best->size;
  const BatchTrial& largest = fits.back();
  if (largest.size == best->size) {
    r.reason =
        fmt::format("{}, the largest size {}", best->rate(), margin_words);
  } else {
    r.reason = fmt::format(
        "{}; no larger size {} is faster by more than {:.0f}% ({}: {})",
        best->rate(),
        margin_words,
        100 * options.speed_tolerance,
        largest.size,
        largest.rate());
  }
}

nlohmann::json ModelState::to_json() const {
  return {
      {"parameters", parameters},
      {"trainable", trainable},
      {"weight_bytes", weight_bytes},
      {"gradient_bytes", gradient_bytes},
      {"optimizer_bytes", optimizer_bytes},
      {"full_gradient_bytes", full_gradient_bytes},
      {"full_optimizer_bytes", full_optimizer_bytes}};
}

std::string ModelState::describe(const std::string& optimizer) const {
  std::string out = fmt::format(
      "weights {}; gradients {} + {} state {} for {} trainable of {} parameters",
      format_bytes(weight_bytes),
      format_bytes(gradient_bytes),
      optimizer,
      format_bytes(optimizer_bytes),
      trainable,
      parameters);
  if (trainable < parameters) {
    out += fmt::format(
        " (training every weight: {} + {})",
        format_bytes(full_gradient_bytes),
        format_bytes(full_optimizer_bytes));
  }
  return out;
}

BatchTrial run_batch_trial(
    std::int64_t size,
    const ModelFactory& make_model,
    const std::shared_ptr<const data::Dataset>& train,
    const BatchFinderOptions& options) {
  return run_trial(
      size,
      make_model,
      train,
      options,
      cuda_of(options.trainer.device),
      nullptr);
}

ModelState model_state(model::Model& model, const TrainerOptions& o) {
  if (o.model.lora.enabled()) {
    if (auto* lm = dynamic_cast<model::LanguageModel*>(&model)) {
      model::add_lora(*lm, o.model.lora);
      if (o.precision == Precision::Bf16) {
        model::store_frozen_projections(*lm, at::kBFloat16);
      }
    }
  }
  const std::uint64_t moments = o.optimizer.kind == OptimizerKind::AdamW ? 2
      : o.optimizer.momentum > 0                                         ? 1
                                                                         : 0;
  ModelState s;
  for (const auto& named : model.named_parameters()) {
    const at::Tensor& p = named.value();
    const auto n = static_cast<std::uint64_t>(p.numel());
    s.parameters += p.numel();
    s.weight_bytes += p.nbytes();
    if (named.key().find(".lora_") == std::string::npos) {
      s.full_gradient_bytes += 4 * n;
      s.full_optimizer_bytes += moments * 4 * n;
    }
    if (p.requires_grad()) {
      s.trainable += p.numel();
      s.gradient_bytes += 4 * n;
      s.optimizer_bytes += moments * 4 * n;
    }
  }
  return s;
}

ModelFactory model_factory(const TrainerOptions& o) {
  const model::ModelOptions model_options = o.model;
  const std::uint64_t seed = o.seed;
  return [model_options, seed] {
    torch::manual_seed(seed);
    return model::make_model(model_options);
  };
}

BatchFinderResult find_batch_size(
    const ModelFactory& make_model,
    std::shared_ptr<const data::Dataset> train,
    const BatchFinderOptions& options,
    const TrialCallback& on_trial,
    std::shared_ptr<parallel::ProcessGroup> group) {
  if (options.max_batch < 1) {
    throw UsageError("max-batch: must be at least 1");
  }
  if (options.trial_steps < 3) {
    throw UsageError(
        "trial-steps: must be at least 3 (2 warm-up steps and one measured)");
  }
  if (options.margin < 0 || options.margin >= 1) {
    throw UsageError(
        fmt::format("margin: {} must be in [0, 1)", options.margin));
  }
  const int cuda = cuda_of(options.trainer.device);
  const bool on_cuda = cuda >= 0;

  BatchFinderResult r;
  r.device = on_cuda ? fmt::format("cuda:{}", cuda) : "cpu";
  r.optimizer =
      options.trainer.optimizer.kind == OptimizerKind::AdamW ? "AdamW" : "SGD";
  r.state = model_state(*make_model(), options.trainer);
  if (on_cuda) {
    // What this process can hold: the device's free memory plus the cache it
    // already has, within --memory-fraction.
    release(cuda);
    const cuda::DeviceMemory d = cuda::device_memory(cuda);
    double usable = static_cast<double>(d.free) +
        static_cast<double>(cuda::memory_stats(cuda).reserved);
    if (options.trainer.memory_fraction > 0) {
      usable = std::min(
          usable,
          options.trainer.memory_fraction * static_cast<double>(d.total));
    }
    r.memory_budget_bytes =
        static_cast<std::uint64_t>((1.0 - options.margin) * usable);
  }

  // Items are not always samples (token data's are tokens): the first
  // trial's epoch says how many samples the data holds for this model.
  auto ceiling = std::min<std::int64_t>(
      options.max_batch, static_cast<std::int64_t>(train->size()));
  if (group && options.trainer.shard < 1) {
    group = nullptr; // unsharded: each rank's trials alone, as one process
  }
  auto trial = [&](std::int64_t size) {
    r.trials.push_back(
        run_trial(size, make_model, train, options, cuda, group));
    if (group) {
      // The search goes on in step on every rank: a size fits where it fits
      // on all of them.
      BatchTrial& t = r.trials.back();
      t.ok = group->allreduce_max(t.ok ? 0 : 1, "batch trial agreement") == 0;
    }
    if (on_trial) {
      on_trial(r.trials.back());
    }
    return r.trials.back().ok;
  };

  // Grow by powers of two to the first failure (or the ceiling) ...
  std::int64_t lo = 0; // the largest size that ran
  std::int64_t hi = 0; // the smallest that ran out of memory; 0: none yet
  for (std::int64_t size = 1;; size = std::min(size * 2, ceiling)) {
    if (!trial(size)) {
      hi = size;
      break;
    }
    lo = size;
    if (size == 1 && r.trials.back().data_samples > 0) {
      ceiling = std::max<std::int64_t>(
          1,
          std::min(
              ceiling,
              r.trials.back().data_samples /
                  std::max(1, options.trainer.world_size)));
    }
    if (size == ceiling) {
      break;
    }
  }
  // ... then halve the gap between the two.
  if (hi == 0) {
    r.reached_ceiling = true;
  } else {
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (trial(mid) ? lo : hi) = mid;
    }
  }
  r.max_batch = lo;
  recommend_batch_size(r, options);
  return r;
}

ResolvedBatch resolve_batch(
    const BatchRequest& request,
    BatchFinderOptions finder,
    const ModelFactory& make_model,
    const std::shared_ptr<const data::Dataset>& train,
    const std::shared_ptr<parallel::ProcessGroup>& group,
    const TrialCallback& on_trial) {
  ResolvedBatch out;
  if (request.batch && request.micro_batch) {
    out.batch = *request.batch;
    out.micro_batch = *request.micro_batch;
    return out;
  }
  if (!request.batch && request.micro_batch.value_or(0) != 0) {
    throw UsageError(
        "--batch auto with a fixed --micro-batch: the finder sets both",
        "give --batch N --micro-batch auto to keep an effective batch of N");
  }
  const int world = group != nullptr ? group->size() : 1;
  finder.trainer.batch = 1; // validated per trial
  finder.trainer.micro_batch = 0;
  if (request.batch) {
    finder.max_batch = *request.batch / world;
  }
  BatchFinderResult r =
      find_batch_size(make_model, train, finder, on_trial, group);
  if (group != nullptr) {
    // Every rank trains with the smallest rank's finding.
    const std::int64_t agreed =
        -group->allreduce_max(-r.recommended, "batch finder agreement");
    if (agreed != r.recommended) {
      out.notes.push_back(fmt::format(
          "batch finder: {} on every rank (the smallest rank's)", agreed));
      r.recommended = agreed;
    }
  }
  if (r.recommended < 1) {
    throw OutOfMemoryError(
        "the batch finder found no micro-batch that fits: " + r.reason);
  }
  if (request.batch) {
    // Keep the effective batch: the largest divisor of each rank's share up
    // to the finding.
    out.batch = *request.batch;
    out.micro_batch = r.recommended;
    while ((out.batch / world) % out.micro_batch != 0) {
      --out.micro_batch;
    }
    out.notes.push_back(fmt::format(
        "micro-batch auto: {} ({} x {} = batch {})",
        out.micro_batch,
        out.batch / out.micro_batch,
        out.micro_batch,
        out.batch));
  } else {
    out.batch = r.recommended * world;
    out.micro_batch = 0;
    out.notes.push_back(fmt::format("batch auto: {}", out.batch));
  }
  out.found = std::move(r);
  return out;
}

} // namespace hotloop::train
