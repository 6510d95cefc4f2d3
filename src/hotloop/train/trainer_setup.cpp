// The trainer's set-up: the device and threads, the model on the device
// (initial weights, frozen parts, channels-last, rank 0's weights on every
// rank), the optimizer's parameter groups, the loss scaler, the loader and
// the run's length, then the parts the loop runs.

#include <set>
#include <unordered_map>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/core/cpus.h"
#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/model/batch_norm.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/script/exported.h"
#include "hotloop/model/shard_units.h"
#include "hotloop/model/weights.h"
#include "hotloop/parallel/gradient_reducer.h"
#include "hotloop/parallel/process_group.h"
#include "hotloop/parallel/sharded_reducer.h"
#include "hotloop/train/callbacks/rank_status_callback.h"
#include "hotloop/train/checkpoint_shards.h"
#include "hotloop/train/device.h"
#include "hotloop/train/mfu.h"
#include "hotloop/train/model_for_data.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/sharded_state.h"
#include "hotloop/train/trainer_parts.h"
#include "hotloop/train/unit_gather.h"

namespace hotloop::train {

namespace {

// Token data goes with a language model, images with an image model; the
// token ids must be in the model's vocabulary.
void check_data_fits(
    const model::Model& model,
    const data::Dataset& data,
    const TrainerOptions& o) {
  check_model_takes(o.model.name, model.tokens_per_sample() > 0, data);
  const auto* tokens = dynamic_cast<const data::TokenDataset*>(&data);
  if (const auto* lm = dynamic_cast<const model::LanguageModel*>(&model)) {
    tokens->check_vocabulary(lm->vocab());
  }
}

// LoRA: adapters on a language model's projections, the rest frozen.
void add_lora_adapters(
    model::Model& model,
    const model::LoraOptions& lora,
    const std::string& init,
    const std::function<void(const std::string&)>& log) {
  auto* lm = dynamic_cast<model::LanguageModel*>(&model);
  if (lm == nullptr) {
    throw UsageError(
        "--lora-rank: LoRA adapts a language model's projections and this model is not one",
        "drop --lora-rank, or fine-tune with --freeze");
  }
  const std::vector<std::string> adapted = model::add_lora(*lm, lora);
  log(fmt::format(
      "lora: rank {}, alpha {:g} (scale {:g}), dropout {:g} on {} projections ({})",
      lora.rank,
      lora.alpha,
      lora.scale(),
      lora.dropout,
      adapted.size(),
      lora.targets.empty() ? std::string("all")
                           : fmt::format("{}", fmt::join(lora.targets, ","))));
  if (init.empty()) {
    return;
  }
  const model::PeftAdapter adapter = model::read_peft_adapter(init);
  if (adapter.options.alpha != lora.alpha) {
    throw UsageError(
        fmt::format(
            "--lora-init {}: its lora_alpha is {:g}, the run's --lora-alpha {:g}",
            init,
            adapter.options.alpha,
            lora.alpha),
        fmt::format("pass --lora-alpha {:g}", adapter.options.alpha));
  }
  std::set<std::string> theirs;
  for (const auto& [name, t] : adapter.weights) {
    theirs.insert(name);
  }
  std::set<std::string> ours;
  for (const auto& [name, t] : model::lora_state(*lm)) {
    ours.insert(name);
  }
  if (adapter.options.rank != lora.rank || theirs != ours) {
    throw UsageError(
        fmt::format(
            "--lora-init {}: its adapters (rank {}, {} tensors) are not the run's (rank {}, {} tensors)",
            init,
            adapter.options.rank,
            theirs.size(),
            lora.rank,
            ours.size()),
        fmt::format(
            "pass --lora-rank {} --lora-targets {}",
            adapter.options.rank,
            adapter.options.targets.empty()
                ? std::string("all")
                : fmt::format("{}", fmt::join(adapter.options.targets, ","))));
  }
  model::load_lora_weights(*lm, adapter.weights, init);
  log(fmt::format("lora: the adapters start from {}", init));
}

Callbacks with_rank_status(Callbacks callbacks, bool data_parallel) {
  if (data_parallel) {
    callbacks.push_back(std::make_shared<RankStatusCallback>());
  }
  return callbacks;
}

} // namespace

Trainer::Impl::Impl(
    std::shared_ptr<model::Model> model_,
    std::shared_ptr<const data::Dataset> train,
    std::shared_ptr<const data::Dataset> val,
    TrainerOptions options_,
    TrainerContext context)
    : options(std::move(options_)),
      model(std::move(model_)),
      train_data(std::move(train)),
      val_data(std::move(val)),
      group(std::move(context.group)),
      record(std::move(context.record)),
      events(with_rank_status(std::move(context.callbacks), group != nullptr)) {
}

void Trainer::Impl::set_up() {
  bind_state();
  configure_device();
  check_data();
  faults = read_fault_injection();
  cap_device_memory();
  load_weights();
  measure_flops();
  place_model();
  if (group) {
    start_from_rank_zero();
  }
  store_frozen_base();
  const model::ParameterCount count = model::count_parameters(*model);
  log(fmt::format(
      "parameters: {} trainable, {} frozen", count.trainable, count.frozen));
  make_optimizer();
  if (faults.oom_unit && !unit_gather) {
    throw UsageError(
        "HOTLOOP_INJECT_OOM_UNIT: this run has no units to inject an OOM into (it needs --shard 3 over ranks and a model with blocks)",
        "unset it, or use HOTLOOP_INJECT_OOM_ABOVE alone");
  }
  make_loader();
  if (const std::string line = loader->packing_line(); !line.empty()) {
    log(line);
  }
  if (const auto* images = dynamic_cast<const data::Loader*>(loader.get());
      images != nullptr && options.loader.decode_on_device) {
    log("feed: " + images->feed_reason()); // which nvJPEG, which backend
  }
  size_run();
  make_loop_parts();
}

// The rank and world size from the group, the options validated, the run
// state's fixed fields, the device.
void Trainer::Impl::bind_state() {
  if (group) {
    options.rank = group->rank();
    options.world_size = group->size();
  }
  options.validate();
  RunState& s = state;
  s.options = &options;
  s.rank = options.rank;
  s.world_size = options.world_size;
  s.group = group.get();
  s.model = model;
  s.log = [this](const std::string& line) { log(line); };
  s.device = resolve_device(options.device);
  s.micro_batch = options.resolved_micro_batch();
  s.accum_steps = options.batch / (s.micro_batch * options.world_size);
}

// Math mode, cuDNN's autotuner, threads; options that need a GPU refused on
// the CPU.
void Trainer::Impl::configure_device() {
  const c10::Device& device = state.device;
  configure_math_mode(options.precision, device);
  if (options.loader.augment_on_device && !device.is_cuda()) {
    throw UsageError(
        "--augment-device gpu needs a CUDA device",
        "use --augment-device cpu (the decode threads) on the CPU");
  }
  if (options.precision == Precision::Fp16 && !device.is_cuda()) {
    throw UsageError(
        "--precision fp16 needs a CUDA device",
        "use --precision bf16 on the CPU");
  }
  if (device.is_cuda()) {
    at::globalContext().setBenchmarkCuDNN(options.cudnn_benchmark);
  }
  at::set_num_threads(
      static_cast<int>(options.threads > 0 ? options.threads : usable_cpus()));
}

// --memory-fraction: the share of the GPU's memory this process may take.
void Trainer::Impl::cap_device_memory() {
  if (options.memory_fraction <= 0) {
    return;
  }
  if (!state.device.is_cuda()) {
    throw UsageError(
        "--memory-fraction caps a GPU's memory; training runs on the CPU",
        "drop --memory-fraction, or train with --device cuda");
  }
  cuda::set_memory_fraction(state.device.index(), options.memory_fraction);
}

// The data must fit the model: its kind, channels and classes.
void Trainer::Impl::check_data() {
  check_data_fits(*model, *train_data, options);
  const auto shape = train_data->shape();
  if (shape && shape->channels != options.model.image.in_channels &&
      options.loader.channels == 0) {
    throw DataError(fmt::format(
        "{} has {} channel(s) but the model takes {}",
        train_data->describe(),
        shape->channels,
        options.model.image.in_channels));
  }
  if (model->tokens_per_sample() == 0 &&
      static_cast<std::int64_t>(train_data->num_classes()) >
          options.model.image.num_classes) {
    throw DataError(fmt::format(
        "{} has {} classes but the model has {} outputs",
        train_data->describe(),
        train_data->num_classes(),
        options.model.image.num_classes));
  }
}

// --init's weights, an exported model's notes, LoRA's adapters, the frozen
// parts.
void Trainer::Impl::load_weights() {
  if (!options.init.empty()) {
    const model::InitResult r = model::load_initial_weights(
        *model, {options.init, options.init_strict, read_whole_weights});
    log(fmt::format("init: {}\n{}", options.init, model::describe(r.report)));
    if (r.head_replaced) {
      log(fmt::format(
          "init: the head '{}' was replaced: the file has {} classes, the model {}",
          model->head_name(),
          r.file_classes,
          options.model.image.num_classes));
    }
  }
  if (const auto* exported =
          dynamic_cast<const model::ExportedModel*>(model.get())) {
    const model::ExportedInfo& i = exported->info();
    log(fmt::format("model: {}, {}", i.path, i.format.description));
    if (i.head_replaced) {
      log(fmt::format(
          "model: the head '{}' was replaced: {} outputs in the file, {} classes in the data",
          i.head,
          i.head_classes,
          options.model.image.num_classes));
    }
    for (const std::string& w : i.warnings) {
      log("model: warning: " + w);
    }
  }
  if (options.model.lora.enabled()) {
    add_lora_adapters(*model, options.model.lora, options.lora_init, state.log);
  }
  if (options.freeze_backbone) {
    model::freeze_backbone(*model);
  }
  if (!options.freeze_patterns.empty()) {
    const std::size_t n =
        model::freeze_matching(*model, options.freeze_patterns);
    log(fmt::format(
        "freeze: {} parameter tensor(s) match {}",
        n,
        fmt::join(options.freeze_patterns, ",")));
  }
}

// FLOPs per sample and the device's peak, for model FLOP/s and MFU.
void Trainer::Impl::measure_flops() {
  RunState& s = state;
  const ModelFlops flops = training_flops(*model, options.model);
  s.flops_per_sample = flops.per_sample;
  if (options.model.lora.enabled() && flops.per_sample > 0) {
    auto& lm = static_cast<model::LanguageModel&>(*model);
    s.flops_per_sample += static_cast<double>(lm.context()) *
        model::lora_flops_per_token_change(lm);
  }
  if (flops.per_sample <= 0) {
    log(fmt::format("model FLOPs unknown ({}): no MFU", flops.source));
  }
  const DevicePeak peak = device_peak(s.device, options.precision);
  s.peak_flops_per_s = peak.flops_per_s * static_cast<double>(s.world_size);
  s.peak_source = peak.source;
}

// Activation checkpointing, the CPU convolution, the device, channels-last.
void Trainer::Impl::place_model() {
  model->set_checkpointing(options.activation_checkpointing);
  model::set_cpu_conv(*model, options.cpu_conv);
  model->to(state.device);
  if (options.channels_last) {
    at::NoGradGuard no_grad;
    for (auto& p : model->parameters()) {
      if (p.dim() == 4) {
        // to(), not contiguous(): a 1x1 or one-input-channel kernel already
        // counts as channels-last contiguous, so contiguous() keeps its NCHW
        // strides, and the convolution, which follows the weight's suggested
        // format, then runs NCHW and converts on every layer (MobileNetV3 on
        // the CPU: half the speed).
        p.set_data(
            p.to(p.options(), false, false, at::MemoryFormat::ChannelsLast));
      }
    }
  }
}

// Every rank starts from rank 0's weights and buffers; --sync-batchnorm.
void Trainer::Impl::start_from_rank_zero() {
  std::vector<at::Tensor> all;
  for (auto& p : model->parameters()) {
    all.push_back(p.data());
  }
  for (auto& b : model->buffers()) {
    all.push_back(b);
  }
  group->broadcast(all, "start (weights from rank 0)");
  const auto* exported = dynamic_cast<const model::ExportedModel*>(model.get());
  if (options.sync_batchnorm && exported && exported->info().batch_norms > 0) {
    throw UsageError(
        "--sync-batchnorm: hotloop cannot reach the BatchNorm layers inside a TorchScript module",
        "drop --sync-batchnorm (each rank normalizes its own micro-batch, as DDP does by default), or export the model with SyncBatchNorm-free normalization (GroupNorm/LayerNorm)");
  }
  if (options.sync_batchnorm && group->size() > 1) {
    const int n = model::synchronize_batch_norm(
        *model,
        [g = group](at::Tensor& t) { g->allreduce_sum_(t, "sync batchnorm"); });
    log(fmt::format(
        "sync batchnorm: {} BatchNorm layer(s) normalize over the global batch of {} ranks{}",
        n,
        group->size(),
        n == 0 ? fmt::format(" ({} has none)", options.model.name)
               : std::string()));
    if (n > 0 && options.oom_recovery) {
      // An OOM mid-forward on one rank would leave the others inside a
      // BatchNorm all-reduce that rank never reaches.
      options.oom_recovery = false;
      log("sync batchnorm: OOM recovery is off (find the batch size first: --batch auto)");
    }
  }
}

// LoRA in bf16: the frozen base stored as autocast reads it.
void Trainer::Impl::store_frozen_base() {
  if (options.model.lora.enabled() && options.precision == Precision::Bf16) {
    // The frozen base in bf16 as autocast reads it: half its memory, no
    // per-step cast; the adapters stay float32 master weights. After the
    // broadcast (Gloo has no bf16).
    const std::size_t saved = model::store_frozen_projections(
        static_cast<model::LanguageModel&>(*model), at::kBFloat16);
    log(fmt::format(
        "lora: the frozen projections are stored in bf16 ({} saved)",
        format_bytes(saved)));
  }
}

namespace {

std::int64_t count_elements(const std::vector<at::Tensor>& tensors) {
  std::int64_t n = 0;
  for (const at::Tensor& t : tensors) {
    n += t.numel();
  }
  return n;
}

// The index of the group holding `t`; groups.size() for none (a trainable
// parameter no group updates).
int group_of(const std::vector<ParamGroup>& groups, const at::Tensor& t) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const at::Tensor& p : groups[g].params) {
      if (p.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        return static_cast<int>(g);
      }
    }
  }
  return static_cast<int>(groups.size());
}

} // namespace

// The optimizer over its parameter groups, data parallel's gradient sync, the
// precision mode.
void Trainer::Impl::make_optimizer() {
  // Parameter groups: one, or backbone + head with their own LRs.
  std::vector<ParamGroup> groups;
  if (options.head_lr >= 0 || options.freeze_backbone) {
    const model::ParameterGroups g = model::parameter_groups(*model);
    const double head_scale =
        options.head_lr >= 0 ? options.head_lr / options.schedule.lr : 1.0;
    if (!g.backbone.empty()) {
      groups.push_back({"backbone", g.backbone, 1.0});
    }
    groups.push_back({"head", g.head, head_scale});
  } else {
    // One group, or two when the model exempts some parameters from weight
    // decay (GPT: biases, norms, positions).
    ParamGroup all{"all", {}, 1.0};
    ParamGroup no_decay{"no_decay", {}, 1.0, false};
    for (auto& p : model->named_parameters()) {
      if (p.value().requires_grad()) {
        (model->decays(p.key(), p.value()) ? all : no_decay)
            .params.push_back(p.value());
      }
    }
    groups.push_back(std::move(all));
    if (!no_decay.params.empty()) {
      groups.push_back(std::move(no_decay));
    }
  }
  for (auto& p : model->named_parameters()) {
    if (p.value().requires_grad()) {
      params.emplace_back(p.key(), p.value());
      tensors.push_back(p.value());
    }
  }
  precision =
      make_precision(options.precision, options.loss_scaling, state.device);
  parallel::BucketOptions buckets;
  buckets.bucket_bytes =
      static_cast<std::size_t>(options.bucket_mb * 1024 * 1024);
  buckets.overlap = options.overlap_allreduce;
  if (!group && options.shard > 0) {
    log(fmt::format(
        "shard: --shard {} has nothing to shard over in one process; it trains unsharded",
        options.shard));
  }
  if (group && options.shard > 0) {
    shard_optimizer(std::move(groups), buckets);
  } else {
    optimizer =
        std::make_unique<Optimizer>(std::move(groups), options.optimizer);
    if (group) {
      sync = std::make_unique<StepSync>(
          group,
          std::make_unique<parallel::GradientReducer>(group, tensors, buckets));
    }
  }
  if (options.offload == "optimizer") {
    optimizer->offload_to_host();
    log(fmt::format(
        "offload: the optimizer's state and its float32 copies of the {} parameters it updates live in host memory{}; each step copies the gradients there and the update back",
        count_elements(tensors),
        state.device.is_cuda()
            ? " (pinned)"
            : " (training runs on the CPU: this moves nothing)"));
  }
  state.optimizer = optimizer.get();
}

namespace {

std::string stage3_line(
    const parallel::ShardedReducer& r,
    bool has_units,
    c10::ScalarType compute) {
  if (r.unit_count() == 0) {
    return has_units
        ? "shard: stage 3: no unit of the model has a trainable parameter, so every parameter stays whole, as at stage 2"
        : "shard: stage 3: this model has no units hotloop can gather one at a time (a TorchScript export is one graph), so its parameters stay whole, as at stage 2";
  }
  const parallel::ShardedBytes b = r.bytes();
  const std::string lowered = compute == c10::ScalarType::Undefined
      ? std::string()
      : fmt::format(
            "; they are gathered and computed in {} while their shards, the optimizer's master copy, and the gradients' reduction stay fp32",
            compute == at::kBFloat16 ? "bf16" : "fp16");
  return fmt::format(
      "shard: stage 3: the parameters of the model's {} units (its blocks) are sharded too, each unit's gathered just before it runs, forward and backward, and freed after (at most two whole at a time: the one running and the next, gathered meanwhile; {} the largest){}; the rest stays whole; this rank holds {} of parameters between steps",
      r.unit_count(),
      format_bytes(b.largest_unit),
      lowered,
      format_bytes(b.parameters));
}

} // namespace

// ZeRO stages 1 and 2: the parameters move into flat buckets each rank
// owns a shard of; the optimizer updates the shards (its groups keep their
// names, LRs and weight decay: a bucket never mixes groups), and the step's
// scaling, clipping and checks see the shards instead of the parameters.
void Trainer::Impl::shard_optimizer(
    std::vector<ParamGroup> whole,
    const parallel::BucketOptions& buckets) {
  std::vector<int> partition;
  for (const at::Tensor& t : tensors) {
    partition.push_back(group_of(whole, t));
  }
  parallel::ShardOptions so;
  so.stage = options.shard;
  so.buckets = buckets;
  so.reduces_in_flight = static_cast<std::size_t>(options.reduces_in_flight);
  so.agree_on_non_finite = precision->skips_overflow();
  so.compute_dtype = compute_dtype(precision->precision());
  auto* units = dynamic_cast<model::ShardUnits*>(model.get());
  if (so.stage == 3 && units != nullptr) {
    so.units = units_of(*units, tensors);
  }
  auto reducer =
      std::make_unique<parallel::ShardedReducer>(group, tensors, partition, so);
  const std::int64_t trainable = count_elements(tensors);
  std::vector<ParamGroup> shards;
  for (const ParamGroup& g : whole) {
    shards.push_back({g.name, {}, g.lr_scale, g.decay});
  }
  params.clear();
  tensors.clear();
  for (std::size_t i = 0; i < reducer->shards().size(); ++i) {
    const auto& sh = reducer->shards()[i];
    if (sh.partition == static_cast<int>(shards.size())) {
      continue; // reduced, never updated: as the whole optimizer does
    }
    ParamGroup& g = shards[static_cast<std::size_t>(sh.partition)];
    params.emplace_back(
        fmt::format("{} shard {}", g.name, g.params.size()), sh.tensor);
    tensors.push_back(sh.tensor);
    g.params.push_back(sh.tensor);
  }
  std::int64_t padding = 0;
  std::int64_t held = 0;
  for (std::size_t i = 0; i < reducer->buckets().size(); ++i) {
    const parallel::ShardLayout& l = reducer->layout(i);
    padding += l.padded - l.numel;
    held += l.shard;
  }
  log(fmt::format(
      "shard: ZeRO stage {} over {} ranks in {} bucket(s): this rank updates {} of the {} trainable parameters ({} of padding over the job); the optimizer state{} held by the rank it belongs to; each rank saves its part of the optimizer state{} in its own file beside each checkpoint",
      options.shard,
      group->size(),
      reducer->buckets().size(),
      held,
      trainable,
      padding,
      options.shard >= 2 ? " and the gradients are" : " is",
      reducer->unit_count() > 0 ? " (and of the blocks' weights)" : ""));
  if (options.shard == 3) {
    log(stage3_line(*reducer, units != nullptr, so.compute_dtype));
  }
  if (reducer->unit_count() > 0) {
    UnitGather::Probe probe;
    if (faults.oom_unit) {
      probe = [this](std::size_t unit, bool backward) {
        faults.oom_in_unit(unit, backward, state.micro_batch);
      };
    }
    unit_gather =
        std::make_unique<UnitGather>(*reducer, *units, std::move(probe));
  }
  sharded = reducer.get();
  whole_groups = std::move(whole);
  optimizer = std::make_unique<Optimizer>(std::move(shards), options.optimizer);
  sync = std::make_unique<StepSync>(group, std::move(reducer));
}

// Steps per epoch from the loader, and the run's length.
void Trainer::Impl::size_run() {
  RunState& s = state;
  s.steps_per_epoch =
      static_cast<std::int64_t>(loader->batches_per_epoch()) / s.accum_steps;
  if (s.steps_per_epoch < 1) {
    throw UsageError(fmt::format(
        "batch: one optimizer step needs {} batches of {} but an epoch has {}",
        s.accum_steps,
        s.micro_batch,
        loader->batches_per_epoch()));
  }
  s.total_steps =
      options.steps > 0 ? options.steps : options.epochs * s.steps_per_epoch;
}

// The run folder, and the parts the loop runs: readback, evaluation, OOM
// recovery, checkpoints.
void Trainer::Impl::make_loop_parts() {
  RunState& s = state;
  s.run_dir = options.out_dir;
  if (!s.run_dir.empty()) {
    RunFolder(s.run_dir).create();
  }
  readback = std::make_unique<Readback>(
      options.readback_every > 0 ? options.readback_every
                                 : (s.device.is_cuda() ? 16 : 1),
      options.clip_grad_norm > 0,
      precision->skips_overflow());
  // Stage 3's evaluation cannot halve its batch on an OOM (the ranks
  // evaluate in step): it runs at the training micro-batch, which fits.
  evaluator = std::make_unique<Evaluator>(
      val_data,
      unit_gather ? s.micro_batch
                  : evaluation_batch(*model, s.micro_batch, options.precision),
      faults,
      /*halve_on_oom=*/unit_gather == nullptr);
  recovery = std::make_unique<OomRecovery>(options.oom_recovery);
  std::shared_ptr<const ShardedOptimizerState> state_shards;
  if (sharded != nullptr) {
    // Stage 3: the units' weights are saved sharded too, by their names.
    std::vector<std::string> names;
    if (unit_gather) {
      std::unordered_map<const c10::TensorImpl*, std::string> named;
      for (const auto& [name, t] : model::state_dict(*model)) {
        named.emplace(t.unsafeGetTensorImpl(), name);
      }
      for (const at::Tensor& p : sharded->params()) {
        names.push_back(named.at(p.unsafeGetTensorImpl()));
      }
    }
    state_shards = std::make_shared<const ShardedOptimizerState>(
        *sharded, whole_groups, group, std::move(names));
  }
  checkpointer = std::make_unique<Checkpointer>(s, faults, state_shards);
}

void Trainer::Impl::make_loader() {
  if (loader) {
    bad_samples_before += loader->stats().bad_samples;
  }
  loader.reset();
  data::LoaderOptions lo = options.loader;
  lo.batch_size = static_cast<std::size_t>(state.micro_batch);
  lo.device = state.device;
  lo.seed = options.seed;
  lo.rank = options.rank;
  lo.world_size = options.world_size;
  lo.train = true;
  lo.channels_last = options.channels_last; // the threads write it so
  lo.context = model->tokens_per_sample();
  loader = data::make_loader(train_data, lo);
  if (loader->packed_rows() && !model->takes_packed_rows()) {
    throw UsageError(
        fmt::format(
            "--packing best-fit or --document-mask: --model {} takes one sequence a row, not rows packed with several sequences",
            options.model.name),
        "pass --packing none (one example a row, padded) or --packing wrap, and --document-mask off");
  }
  state.batches = loader.get();
}

} // namespace hotloop::train
