// The training loop. One optimizer step:
//   accum_steps x (loader.next -> autocast forward -> loss / accum -> (scaled)
//   backward) -> unscale + inf check (fp16) -> clip -> optimizer step at the
//   schedule's LR -> scaler update -> metrics line -> eval / checkpoint when
//   due.
// With CUDA graphs (graph_policy.h): loader.next -> copy into the static
// batch -> set the LR on the device -> replay (zero_grad, forward, backward,
// clip, optimizer step). Losses come back every --readback-every steps
// (step_readback.h); metrics lines wait for theirs.

#include "hotloop/train/trainer.h"

#include <sys/resource.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <numeric>

#include "hotloop/build_info.h"
#include "hotloop/core/cpus.h"
#include "hotloop/core/first_line.h"
#include "hotloop/core/progress.h"
#include "hotloop/cuda/cuda_graph.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/dist/gradient_reducer.h"
#include "hotloop/dist/process_group.h"
#include "hotloop/errors.h"
#include "hotloop/model/batch_norm.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/weights.h"
#include "hotloop/telemetry/run_telemetry.h"
#include "hotloop/train/checkpoint.h"
#include "hotloop/train/graph_policy.h"
#include "hotloop/train/graph_step.h"
#include "hotloop/train/loss_scaler.h"
#include "hotloop/train/oom.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/schedule.h"
#include "hotloop/train/step_readback.h"

namespace hotloop::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::uint64_t peak_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024; // Linux: KiB
}

c10::Device resolve_device(const std::string& text) {
  if (text == "auto") {
    return at::hasCUDA() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  const c10::Device d(text == "cuda" ? "cuda:0" : text);
  if (d.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        fmt::format("--device {}: CUDA is not available", text),
        "run `hotloop doctor` to see why, or use --device cpu");
  }
  return d;
}

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return std::string("runs/") + stamp;
}

model::StateDict cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return {{"cpu", gen.get_state()}};
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// What one optimizer step's micro-batches left behind.
struct MicroBatchesResult {
  at::Tensor loss_sum; // mean loss of the step (0-dim, on the device)
  std::optional<data::Batch> first_batch; // for the first step's device check
  double wait = 0; // seconds spent waiting for the loader
};

// A metrics line waiting for its step's loss to be read back (or, for a
// diagnosis window's line, for the step lines before it).
struct PendingLine {
  nlohmann::json line;
  std::int64_t step = 0;
  bool needs_loss = false;
};

// cuda::Graph as what GraphedStep captures with.
class CudaGraphBackend final : public GraphBackend {
 public:
  explicit CudaGraphBackend(int device) : graph_(device) {}
  void capture(const std::function<void()>& body) override {
    graph_.capture(body);
  }
  void replay() override {
    graph_.replay();
  }

 private:
  cuda::Graph graph_;
};

} // namespace

nlohmann::json TrainSummary::to_json() const {
  nlohmann::json j = {
      {"steps", steps},
      {"epochs", epochs},
      {"train_loss", train_loss},
      {"val_loss", eval ? nlohmann::json(eval->loss) : nlohmann::json()},
      {"val_accuracy",
       eval ? nlohmann::json(eval->accuracy) : nlohmann::json()},
      {"images_per_s", images_per_s},
      {"step_time_ms",
       {{"median", step_time_ms_median}, {"p90", step_time_ms_p90}}},
      {"data_wait_fraction", data_wait_fraction},
      {"peak_memory_bytes",
       {{"allocated", peak_allocated_bytes},
        {"reserved", peak_reserved_bytes},
        {"rss", peak_rss_bytes}}},
      {"skipped_steps", skipped_steps},
      {"bad_samples", bad_samples},
      {"micro_batch", micro_batch},
      {"accum_steps", accum_steps},
      {"oom_recoveries", oom_recoveries},
      {"device", device},
      {"precision", precision},
      {"wall_s", wall_s},
      {"cuda_graphs",
       {{"replays", graph_replays}, {"off_reason", graph_off_reason}}},
      {"stopped_early", stopped_early},
      {"last_checkpoint", last_checkpoint}};
  j["telemetry"] = telemetry;
  j["telemetry_overhead"] = telemetry.value("overhead", 0.0);
  j["diagnosis"] = telemetry.contains("diagnosis")
      ? telemetry["diagnosis"]["verdict"]
      : nlohmann::json();
  if (eval) {
    j["val_per_class_accuracy"] = eval->per_class_accuracy;
    j["val_confusion"] = eval->confusion;
    j["val_samples"] = eval->samples;
  }
  return j;
}

struct Trainer::Impl {
  TrainerOptions options;
  std::shared_ptr<model::Model> model;
  std::shared_ptr<const data::Dataset> train_data;
  std::shared_ptr<const data::Dataset> val_data;
  std::shared_ptr<dist::ProcessGroup> group; // data parallel; null: one rank
  std::unique_ptr<dist::GradientReducer> reducer; // with group
  c10::Device device{c10::kCPU};
  std::string run_dir;
  std::int64_t micro_batch = 0;
  std::int64_t accum_steps = 1;
  std::unique_ptr<data::Loader> loader;
  std::unique_ptr<data::Loader> val_loader;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LossScaler> scaler;
  std::vector<std::pair<std::string, at::Tensor>> named_params; // trainable
  std::vector<at::Tensor> params; // the same tensors, for the scaler's unscale
  std::ofstream metrics;

  // OOM recovery: the state a failed step attempt may have changed (BatchNorm
  // statistics, the generators dropout draws from), saved at each step's
  // start.
  std::optional<std::int64_t> inject_oom_above; // HOTLOOP_INJECT_OOM_ABOVE
  std::vector<std::int64_t> inject_overflow; // HOTLOOP_INJECT_OVERFLOW_STEPS
  std::int64_t oom_recoveries = 0;
  std::vector<at::Tensor> buffers;
  std::vector<at::Tensor> saved_buffers;
  at::Tensor saved_cpu_rng;
  std::vector<std::uint8_t> saved_cuda_rng;
  std::int64_t eval_batch = 0;
  std::unique_ptr<telemetry::RunTelemetry> telemetry;

  // CUDA graphs: the captured step and the tensors it reads and writes at
  // fixed addresses. Null `graphed`: every step eager.
  std::unique_ptr<cuda::StreamScope> graph_stream;
  std::unique_ptr<GraphedStep> graphed;
  at::Tensor static_images, static_labels, static_loss, static_grad_norm;
  std::string graph_decision_reason; // why not captured (plan_graphs)

  // Losses and gradient norms on their way back to the host, and the
  // metrics lines waiting for them.
  std::unique_ptr<StepReadback> readback;
  std::deque<PendingLine> pending_lines;
  std::vector<double> recent_losses; // the last 50 read back
  double last_loss = std::nan("");
  at::Tensor zero_norm; // the grad-norm column when clipping is off

  // Progress through the run.
  std::int64_t step = 0;
  std::int64_t total_steps = 0;
  std::int64_t steps_per_epoch = 0;
  std::size_t epoch = 0;
  std::size_t next_batch = 0;
  std::string last_checkpoint;

  // What this rank is doing, for the failure messages of the others and of
  // the launcher (dist/rank_status.h); free: two relaxed stores.
  void phase(dist::RankPhase p) const {
    if (group) {
      group->set_status(step, p);
    }
  }

  void log(const std::string& line) const {
    if (options.rank == 0 && !options.trial && !options.quiet) {
      if (options.progress_bar) {
        // Clear the progress bar's line; its next update redraws it below.
        fmt::print(stderr, "\r\033[K");
        std::fflush(stderr);
      }
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
  }

  void setup() {
    if (group) {
      options.rank = group->rank();
      options.world_size = group->size();
    }
    options.validate();
    device = resolve_device(options.device);
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
    at::set_num_threads(static_cast<int>(
        options.threads > 0 ? options.threads : usable_cpus()));

    // The data must fit the model.
    const auto shape = train_data->shape();
    if (shape && shape->channels != options.model.in_channels &&
        options.loader.channels == 0) {
      throw DataError(fmt::format(
          "{} has {} channel(s) but the model takes {}",
          train_data->describe(),
          shape->channels,
          options.model.in_channels));
    }
    if (static_cast<std::int64_t>(train_data->num_classes()) >
        options.model.num_classes) {
      throw DataError(fmt::format(
          "{} has {} classes but the model has {} outputs",
          train_data->describe(),
          train_data->num_classes(),
          options.model.num_classes));
    }

    micro_batch = options.micro_batch > 0 ? options.micro_batch
                                          : options.batch / options.world_size;
    accum_steps = options.batch / (micro_batch * options.world_size);
    eval_batch = std::max<std::int64_t>(micro_batch, 256);
    inject_oom_above = injected_oom_limit();
    inject_overflow = injected_overflow_steps();
    if (options.memory_fraction > 0) {
      if (!device.is_cuda()) {
        throw UsageError(
            "--memory-fraction caps a GPU's memory; training runs on the CPU",
            "drop --memory-fraction, or train with --device cuda");
      }
      cuda::set_memory_fraction(device.index(), options.memory_fraction);
    }

    if (!options.init.empty()) {
      const model::InitResult r = model::load_initial_weights(
          *model, {options.init, options.init_strict});
      log(fmt::format("init: {}\n{}", options.init, model::describe(r.report)));
      if (r.head_replaced) {
        log(fmt::format(
            "init: the head '{}' was replaced: the file has {} classes, the model {}",
            model->head_name(),
            r.file_classes,
            options.model.num_classes));
      }
    }
    if (options.freeze_backbone) {
      model::freeze_backbone(*model);
    }
    model->set_checkpointing(options.activation_checkpointing);
    model::set_cpu_conv(*model, options.cpu_conv);
    model->to(device);
    if (options.channels_last) {
      at::NoGradGuard no_grad;
      for (auto& p : model->parameters()) {
        if (p.dim() == 4) {
          p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
        }
      }
    }
    if (group) {
      // Every rank starts from rank 0's weights and buffers.
      std::vector<at::Tensor> state;
      for (auto& p : model->parameters()) {
        state.push_back(p.data());
      }
      for (auto& b : model->buffers()) {
        state.push_back(b);
      }
      group->broadcast(state, "start (weights from rank 0)");
      if (options.sync_batchnorm && group->size() > 1) {
        const int n =
            model::synchronize_batch_norm(*model, [g = group](at::Tensor& t) {
              g->allreduce_sum_(t, "sync batchnorm");
            });
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
    const model::ParameterCount count = model::count_parameters(*model);
    log(fmt::format(
        "parameters: {} trainable, {} frozen", count.trainable, count.frozen));

    // Parameter groups: one, or backbone + head with their own LRs.
    std::vector<ParamGroup> groups;
    const bool split_head = options.head_lr >= 0 || options.freeze_backbone;
    if (split_head) {
      const model::ParameterGroups g = model::parameter_groups(*model);
      const double head_scale =
          options.head_lr >= 0 ? options.head_lr / options.schedule.lr : 1.0;
      if (!g.backbone.empty()) {
        groups.push_back({"backbone", g.backbone, 1.0});
      }
      groups.push_back({"head", g.head, head_scale});
    } else {
      ParamGroup all{"all", {}, 1.0};
      for (auto& p : model->parameters()) {
        if (p.requires_grad()) {
          all.params.push_back(p);
        }
      }
      groups.push_back(std::move(all));
    }
    for (auto& p : model->named_parameters()) {
      if (p.value().requires_grad()) {
        named_params.emplace_back(p.key(), p.value());
        params.push_back(p.value());
      }
    }
    optimizer =
        std::make_unique<Optimizer>(std::move(groups), options.optimizer);
    if (group) {
      dist::ReducerOptions ro;
      ro.bucket_bytes =
          static_cast<std::size_t>(options.bucket_mb * 1024 * 1024);
      ro.overlap = options.overlap_allreduce;
      reducer = std::make_unique<dist::GradientReducer>(group, params, ro);
    }
    scaler = std::make_unique<LossScaler>(
        LossScalerOptions{},
        device,
        scales_loss(options.loss_scaling, options.precision));

    make_loader();
    steps_per_epoch =
        static_cast<std::int64_t>(loader->batches_per_epoch()) / accum_steps;
    if (steps_per_epoch < 1) {
      throw UsageError(fmt::format(
          "batch: one optimizer step needs {} batches of {} but an epoch has {}",
          accum_steps,
          micro_batch,
          loader->batches_per_epoch()));
    }
    total_steps =
        options.steps > 0 ? options.steps : options.epochs * steps_per_epoch;

    if (options.trial) {
      return; // no run directory
    }
    run_dir = options.out_dir.empty() ? default_run_dir() : options.out_dir;
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    if (ec) {
      throw DataError(fmt::format(
          "cannot create the run folder {}: {}", run_dir, ec.message()));
    }
  }

  // The training loader for the current micro-batch; the old one (its
  // threads and batch buffers) goes first.
  void make_loader() {
    loader.reset();
    data::LoaderOptions lo = options.loader;
    lo.batch_size = static_cast<std::size_t>(micro_batch);
    lo.device = device;
    lo.seed = options.seed;
    lo.rank = options.rank;
    lo.world_size = options.world_size;
    lo.train = true;
    loader = std::make_unique<data::Loader>(train_data, lo);
  }

  Checkpoint make_checkpoint() const {
    Checkpoint c;
    c.meta = {
        {"step", step},
        {"epoch", epoch},
        {"next_batch", next_batch},
        {"micro_batch", micro_batch},
        {"total_steps", total_steps},
        {"hotloop", build_info().hotloop_version},
        {"config", options.to_json()}};
    c.model = model::state_dict(*model);
    c.optimizer = optimizer->state();
    c.scaler = scaler->state();
    c.rng = cpu_rng_state();
    if (device.is_cuda()) {
      const auto bytes = cuda::rng_state(device.index());
      at::Tensor t =
          at::empty({static_cast<std::int64_t>(bytes.size())}, at::kByte);
      std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
      c.rng.emplace_back("cuda", t);
    }
    return c;
  }

  std::string checkpoint_now() {
    if (options.rank != 0 || options.trial || !options.write_checkpoints) {
      return {};
    }
    last_checkpoint = save_checkpoint(
        (fs::path(run_dir) / "checkpoints").string(),
        step,
        make_checkpoint(),
        options.keep_checkpoints);
    return last_checkpoint;
  }

  void restore(const std::string& path, const Checkpoint& c) {
    model::LoadOptions lo;
    lo.source = path;
    model::load_state_dict(*model, c.model, lo);
    optimizer->load_state(c.optimizer);
    scaler->load_state(c.scaler);
    for (const auto& [name, t] : c.rng) {
      if (name == "cpu") {
        set_cpu_rng_state(t);
      } else if (name == "cuda" && device.is_cuda()) {
        const auto* p = t.data_ptr<std::uint8_t>();
        cuda::set_rng_state(device.index(), {p, p + t.numel()});
      }
    }
    step = c.meta.at("step").get<std::int64_t>();
    epoch = c.meta.at("epoch").get<std::size_t>();
    // The position counts batches of the checkpoint's micro-batch, which OOM
    // recovery (or the user) may have changed since: convert it through
    // samples. A checkpoint is taken between steps, so both divide it.
    const auto saved_micro =
        c.meta.value("micro_batch", static_cast<std::size_t>(micro_batch));
    next_batch = c.meta.at("next_batch").get<std::size_t>() * saved_micro /
        static_cast<std::size_t>(micro_batch);
    // Metrics written after this checkpoint belong to a timeline that is
    // being replayed: drop them.
    const fs::path metrics_path = fs::path(run_dir) / "metrics.jsonl";
    std::ifstream in(metrics_path);
    std::vector<std::string> keep;
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("step", std::int64_t{0}) <= step) {
        keep.push_back(line);
      }
    }
    in.close();
    std::ofstream out(metrics_path, std::ios::trunc);
    for (const auto& line : keep) {
      out << line << '\n';
    }
    log(fmt::format(
        "resumed from {} at step {} (epoch {}, batch {})",
        path,
        step,
        epoch,
        next_batch));
  }

  // Restores the checkpoint `options.resume` names; returns whether it did.
  // A fresh run refuses a run directory that already holds checkpoints, so
  // that a forgotten --resume does not mix two runs.
  bool maybe_resume() {
    const std::string dir = (fs::path(run_dir) / "checkpoints").string();
    if (options.resume.empty()) {
      if (!list_checkpoints(dir).empty()) {
        throw UsageError(
            fmt::format("{} already holds a run's checkpoints", run_dir),
            "continue it with --resume auto, or choose another --out");
      }
      return false;
    }
    if (options.resume == "auto") {
      auto found = newest_valid_checkpoint(
          dir, [this](const std::string& w) { log("warning: " + w); });
      if (!found) {
        log(fmt::format(
            "resume auto: no checkpoint in {}; starting fresh", dir));
        return false;
      }
      restore(found->first, found->second);
      return true;
    }
    restore(options.resume, load_checkpoint(options.resume));
    return true;
  }

  void check_devices(const data::Batch& batch) const {
    auto expect = [&](const std::string& what, const at::Tensor& t) {
      if (t.defined() && t.device() != device) {
        throw Error(
            fmt::format(
                "{} is on {} but training runs on {}",
                what,
                t.device().str(),
                device.str()),
            "every tensor must be moved with the model (model->to(device)); a model or batch left on the CPU trains there silently");
      }
    };
    for (const auto& p : model->named_parameters()) {
      expect("parameter " + p.key(), p.value());
      expect("gradient of " + p.key(), p.value().grad());
      if (p.value().scalar_type() != at::kFloat) {
        throw Error(fmt::format(
            "parameter {} is {}, expected float32 master weights",
            p.key(),
            c10::toString(p.value().scalar_type())));
      }
    }
    for (const auto& b : model->named_buffers()) {
      expect("buffer " + b.key(), b.value());
    }
    for (const auto& [name, t] : optimizer->state()) {
      if (name != "steps") {
        expect("optimizer state " + name, t);
      }
    }
    expect("the input batch", batch.images);
    expect("the labels", batch.labels);
  }

  // Scales the gradients to a global norm of at most --clip-grad-norm on the
  // device, without a synchronization (as torch's foreach clip_grad_norm_
  // does); returns the norm before clipping (0-dim, float, on the device).
  at::Tensor clip_gradients() {
    std::vector<at::Tensor> grads;
    for (auto& [name, p] : named_params) {
      if (p.grad().defined()) {
        grads.push_back(p.grad());
      }
    }
    if (grads.empty()) {
      return zero_norm;
    }
    const at::Tensor total =
        at::stack(at::_foreach_norm(grads)).norm().to(at::kFloat);
    const at::Tensor coef =
        (options.clip_grad_norm / (total + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(grads, coef);
    return total;
  }

  std::string bf16_advice() const {
    return device.is_cuda() && mixed_precision_for(device) == Precision::Bf16
        ? "; this GPU supports bf16: --precision bf16 needs no loss scaling"
        : "";
  }

  // One pass over the validation set. Out of memory there halves the
  // evaluation batch and starts the pass again (it changes no state).
  EvalResult evaluate() {
    if (!val_data) {
      return {};
    }
    for (;;) {
      try {
        return evaluate_once();
      } catch (const c10::OutOfMemoryError& e) {
        model->train();
        val_loader.reset();
        if (device.is_cuda()) {
          cuda::empty_cache();
        }
        if (eval_batch <= 1 || options.trial) {
          throw;
        }
        eval_batch /= 2;
        log(fmt::format(
            "evaluation: out of memory ({}); again with batch {}",
            first_line(e.what()),
            eval_batch));
      }
    }
  }

  EvalResult evaluate_once() {
    if (!val_loader) {
      data::LoaderOptions lo = options.loader;
      lo.batch_size = static_cast<std::size_t>(eval_batch);
      lo.device = device;
      lo.train = false;
      lo.shuffle = false;
      lo.drop_last = false;
      lo.rank = 0;
      lo.world_size = 1;
      val_loader = std::make_unique<data::Loader>(val_data, lo);
    }
    const std::int64_t k = options.model.num_classes;
    model->eval();
    at::NoGradGuard no_grad;
    double loss_sum = 0;
    at::Tensor confusion =
        at::zeros({k * k}, at::TensorOptions().dtype(at::kLong).device(device));
    std::int64_t n = 0;
    val_loader->start_epoch(0);
    while (auto b = val_loader->next()) {
      at::Tensor logits;
      {
        AutocastScope autocast(options.precision, device);
        logits = model->forward(b->images);
      }
      logits = logits.to(at::kFloat);
      loss_sum +=
          at::cross_entropy_loss(logits, b->labels, {}, at::Reduction::Sum)
              .item<double>();
      confusion +=
          at::bincount(b->labels * k + at::argmax(logits, 1), {}, k * k);
      n += b->labels.size(0);
    }
    model->train();
    EvalResult r;
    r.samples = n;
    r.loss = n > 0 ? loss_sum / static_cast<double>(n) : 0;
    const at::Tensor cm = confusion.to(at::kCPU).reshape({k, k});
    const auto* c = cm.data_ptr<std::int64_t>();
    std::int64_t correct = 0;
    r.confusion.assign(k, std::vector<std::int64_t>(k));
    for (std::int64_t t = 0; t < k; ++t) {
      std::int64_t row = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        r.confusion[t][p] = c[t * k + p];
        row += c[t * k + p];
      }
      correct += c[t * k + t];
      r.per_class_accuracy.push_back(
          row > 0 ? static_cast<double>(c[t * k + t]) / static_cast<double>(row)
                  : 0.0);
    }
    r.accuracy =
        n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0;
    return r;
  }

  void write_metrics(const nlohmann::json& j) {
    if (metrics.is_open()) {
      metrics << j.dump() << '\n';
    }
  }

  // Saves what a step attempt that runs out of memory may change before it
  // fails: BatchNorm's running statistics (updated in forward) and the
  // generators (dropout). Gradients need no copy: they are zero between steps.
  void save_step_state() {
    at::NoGradGuard no_grad;
    if (buffers.empty()) {
      for (const auto& b : model->buffers()) {
        if (b.defined()) {
          buffers.push_back(b);
          saved_buffers.push_back(b.clone());
        }
      }
    } else {
      at::_foreach_copy_(saved_buffers, buffers);
    }
    saved_cpu_rng = cpu_rng_state().front().second;
    if (device.is_cuda()) {
      saved_cuda_rng = cuda::rng_state(device.index());
    }
  }

  void restore_step_state() {
    at::NoGradGuard no_grad;
    if (!buffers.empty()) {
      at::_foreach_copy_(buffers, saved_buffers);
    }
    set_cpu_rng_state(saved_cpu_rng);
    if (device.is_cuda()) {
      cuda::set_rng_state(device.index(), saved_cuda_rng);
    }
  }

  // accum_steps x (next batch -> autocast forward -> loss -> (scaled)
  // backward). Throws c10::OutOfMemoryError when a micro-batch does not fit.
  MicroBatchesResult run_micro_batches() {
    MicroBatchesResult r;
    for (std::int64_t a = 0; a < accum_steps; ++a) {
      std::optional<data::Batch> b = next_train_batch(r);
      at::Tensor images = options.channels_last
          ? b->images.contiguous(at::MemoryFormat::ChannelsLast)
          : b->images;
      at::Tensor logits;
      phase(dist::RankPhase::Forward);
      {
        AutocastScope autocast(options.precision, device);
        logits = model->forward(images);
      }
      telemetry->end_phase(telemetry::Phase::Forward);
      const at::Tensor loss = at::cross_entropy_loss(
          logits.to(at::kFloat),
          b->labels,
          {},
          at::Reduction::Mean,
          -100,
          options.label_smoothing);
      phase(dist::RankPhase::Backward);
      if (reducer && a == accum_steps - 1) {
        reducer->arm(); // the final gradients: buckets start during backward
      }
      scaler->scale(loss / static_cast<double>(accum_steps)).backward();
      telemetry->end_phase(telemetry::Phase::Backward);
      inject_oom_if_above(inject_oom_above, images.size(0));
      if (a == accum_steps - 1 &&
          std::find(inject_overflow.begin(), inject_overflow.end(), step + 1) !=
              inject_overflow.end()) {
        at::NoGradGuard no_grad;
        params.front().mutable_grad().fill_(
            std::numeric_limits<float>::infinity());
      }
      const at::Tensor l = loss.detach() / static_cast<double>(accum_steps);
      r.loss_sum = r.loss_sum.defined() ? r.loss_sum + l : l;
      if (!r.first_batch) {
        r.first_batch = std::move(b);
      }
    }
    return r;
  }

  // The next training batch; an error when the epoch ends early.
  data::Batch next_train_batch(MicroBatchesResult& r) {
    phase(dist::RankPhase::Data);
    std::optional<data::Batch> b = loader->next();
    r.wait += loader->last_wait_seconds();
    telemetry->end_phase(telemetry::Phase::DataWait);
    if (!b) {
      throw Error(fmt::format(
          "the loader ended epoch {} at batch {}, before the {} batches an epoch should have",
          epoch,
          next_batch,
          steps_per_epoch * accum_steps));
    }
    ++next_batch;
    return std::move(*b);
  }

  // What a CUDA graph captures: one whole step on the static batch, from
  // zeroing the gradients (set to None: backward allocates them from the
  // graph's pool) to the optimizer's update with the LR on the device. Run
  // eagerly for the warm-up steps and after a fallback.
  void graph_body() {
    optimizer->zero_grad();
    at::Tensor logits;
    {
      AutocastScope autocast(options.precision, device, /*cache=*/false);
      logits = model->forward(static_images);
    }
    const at::Tensor loss = at::cross_entropy_loss(
        logits.to(at::kFloat),
        static_labels,
        {},
        at::Reduction::Mean,
        -100,
        options.label_smoothing);
    loss.backward();
    at::NoGradGuard no_grad;
    static_loss.copy_(loss.detach());
    if (options.clip_grad_norm > 0) {
      static_grad_norm.copy_(clip_gradients());
    }
    optimizer->step_on_device();
  }

  // One step through the graph: the batch is copied into the static tensors
  // (new ones, and the end of replays, when its shape changes), the LR is
  // written on the device, and the captured step replays.
  MicroBatchesResult run_graphed_step(double lr) {
    MicroBatchesResult r;
    data::Batch b = next_train_batch(r);
    const at::Tensor images = options.channels_last
        ? b.images.contiguous(at::MemoryFormat::ChannelsLast)
        : b.images;
    phase(dist::RankPhase::Forward);
    if (!static_images.defined() || static_images.sizes() != images.sizes() ||
        static_labels.sizes() != b.labels.sizes()) {
      if (static_images.defined()) {
        graphed->fall_back(fmt::format(
            "the batch changed shape from {} to {} (dynamic shapes)",
            fmt::join(static_images.sizes(), "x"),
            fmt::join(images.sizes(), "x")));
      }
      static_images = at::empty_like(images);
      static_labels = at::empty_like(b.labels);
    }
    if (!static_loss.defined()) {
      const auto o = at::TensorOptions().dtype(at::kFloat).device(device);
      static_loss = at::zeros({}, o);
      static_grad_norm = at::zeros({}, o);
    }
    static_images.copy_(images);
    static_labels.copy_(b.labels);
    optimizer->set_device_scalars(lr);
    graphed->run([this] { graph_body(); });
    telemetry->end_phase(telemetry::Phase::Graph);
    inject_oom_if_above(inject_oom_above, images.size(0));
    r.loss_sum = static_loss;
    r.first_batch = std::move(b);
    return r;
  }

  // Decides at the start of fit() whether the step is captured (and logs
  // why not on a GPU); sets up the stream the graph lives on.
  void plan_graphs() {
    GraphConditions c;
    c.cuda_device = device.is_cuda();
    c.loss_scaling = scaler->enabled();
    c.accum_steps = accum_steps;
    c.world_size = options.world_size;
    c.trial = options.trial;
    c.steps_to_run = total_steps - step;
    const GraphDecision d = decide_graph_capture(options.cuda_graphs, c);
    graph_decision_reason = d.reason;
    if (!d.capture) {
      if (options.cuda_graphs == CudaGraphs::On) {
        throw UsageError(
            "cuda-graphs: --cuda-graphs on, but " + d.reason,
            "use --cuda-graphs auto to run eagerly where graphs cannot");
      }
      if (device.is_cuda() && options.cuda_graphs == CudaGraphs::Auto) {
        log("CUDA graphs: off: " + d.reason);
      }
      return;
    }
    graph_stream = std::make_unique<cuda::StreamScope>(device.index());
    GraphStepOptions go;
    go.warmup_steps = kGraphWarmupSteps;
    go.required = options.cuda_graphs == CudaGraphs::On;
    const int index = device.index();
    graphed = std::make_unique<GraphedStep>(
        go,
        [index] { return std::make_unique<CudaGraphBackend>(index); },
        [this](const std::string& line) { log(line); });
  }

  bool graph_path() const {
    return graphed && graphed->state() != GraphedStep::State::Eager;
  }

  // Puts read-back losses into their metrics lines and writes every line
  // that is complete, in order. A non-finite loss found here stops the run;
  // it has been applied already (no checkpoint is written: the newest one
  // is the last good state).
  void take_losses(const std::vector<StepReadback::Row>& rows) {
    for (const auto& row : rows) {
      const double loss = row.values[0];
      // fp16: an overflowing loss is the scaler's business (it skips the
      // step), not an error.
      if (!std::isfinite(loss) && !scaler->enabled()) {
        write_ready_lines(); // the steps before it keep their lines
        throw Error(
            fmt::format(
                "step {}: the loss is {} (read back at step {}: losses are read every {} steps, so the update was applied; the last good state is the newest checkpoint{})",
                row.step,
                loss,
                step,
                readback->every(),
                last_checkpoint.empty() ? std::string()
                                        : ", " + last_checkpoint),
            "lower the learning rate, add --clip-grad-norm or --warmup-steps, and check the data for bad labels; --readback-every 1 stops before a non-finite loss is applied");
      }
      for (auto& p : pending_lines) {
        if (p.needs_loss && p.step == row.step) {
          p.line["loss"] = loss;
          if (options.clip_grad_norm > 0) {
            p.line["grad_norm"] = row.values[1];
          }
          p.needs_loss = false;
          break;
        }
      }
      note_loss(loss);
      telemetry->record_loss(row.step, loss);
    }
    write_ready_lines();
  }

  // The latest loss read back, for the progress line.
  std::string loss_text() const {
    return std::isnan(last_loss) ? std::string("-")
                                 : fmt::format("{:.4f}", last_loss);
  }

  void note_loss(double loss) {
    last_loss = loss;
    recent_losses.push_back(loss);
    if (recent_losses.size() > 50) {
      recent_losses.erase(recent_losses.begin());
    }
  }

  void write_ready_lines() {
    while (!pending_lines.empty() && !pending_lines.front().needs_loss) {
      write_metrics(pending_lines.front().line);
      pending_lines.pop_front();
    }
  }

  // The step that began at batch `step_start` ran out of memory: its
  // gradients, BatchNorm statistics and generators are put back, the memory
  // report is written, and the step is set up again with a smaller
  // micro-batch and more accumulation (same samples, same effective batch).
  // Throws OutOfMemoryError when the micro-batch cannot shrink (or recovery
  // is off).
  void recover_from_oom(const std::string& error, std::size_t step_start) {
    optimizer->zero_grad();
    if (options.oom_recovery) {
      restore_step_state(); // saved at the step's start
    }
    const std::int64_t per_rank = options.batch / options.world_size;
    const std::int64_t smaller =
        options.oom_recovery ? smaller_micro_batch(per_rank, micro_batch) : 0;
    nlohmann::json report = memory_report(device);
    report["step"] = step + 1;
    report["micro_batch"] = micro_batch;
    report["accum_steps"] = accum_steps;
    report["error"] = error;
    report["action"] = smaller > 0
        ? nlohmann::json(
              {{"micro_batch", smaller}, {"accum_steps", per_rank / smaller}})
        : nlohmann::json("stop");
    if (device.is_cuda()) {
      cuda::empty_cache();
    }
    // Each rank reports its own device (rank 0: oom_report.jsonl).
    const std::string report_path =
        (fs::path(run_dir) /
         (options.rank == 0
              ? std::string("oom_report.jsonl")
              : fmt::format("oom_report-rank{}.jsonl", options.rank)))
            .string();
    if (!run_dir.empty()) {
      std::ofstream(report_path, std::ios::app) << report.dump() << '\n';
    }
    if (smaller == 0) {
      throw OutOfMemoryError(
          fmt::format(
              "step {}: out of memory at micro-batch {}{} ({}); {}; memory report: {}",
              step + 1,
              micro_batch,
              options.oom_recovery ? "" : " with OOM recovery off",
              error,
              describe_memory(report),
              report_path),
          fmt::format(
              "{}options that need less memory: --precision bf16 (or fp16 on CUDA), --activation-checkpointing stages, a smaller --size or model; on a shared GPU, stop the other processes",
              options.oom_recovery
                  ? ""
                  : "--oom-recovery true halves the micro-batch and keeps the effective batch; "));
    }
    log(fmt::format(
        "step {}: {} at micro-batch {}; redoing the step as {} x {} (batch {} unchanged); report: {}",
        step + 1,
        error,
        micro_batch,
        per_rank / smaller,
        smaller,
        options.batch,
        report_path));
    const std::size_t sample_offset =
        step_start * static_cast<std::size_t>(micro_batch);
    micro_batch = smaller;
    accum_steps = per_rank / smaller;
    make_loader();
    next_batch = sample_offset / static_cast<std::size_t>(micro_batch);
    loader->start_epoch(epoch, next_batch);
    ++oom_recoveries;
    write_metrics(
        {{"step", step},
         {"event", "oom_recovery"},
         {"micro_batch", micro_batch},
         {"accum_steps", accum_steps}});
  }

  TrainSummary fit(const std::atomic<bool>* stop) {
    const Clock::time_point start = Clock::now();
    if (!options.trial && options.rank == 0) {
      std::ofstream(fs::path(run_dir) / "config.json")
          << options.to_json().dump(2) << '\n';
    }
    log(fmt::format(
        "train: {} on {} ({}), {} steps = {:.2f} epoch(s) of {} steps; batch {} = {} x {} micro-batch(es){}",
        options.model.name,
        device.str(),
        to_string(options.precision),
        total_steps,
        static_cast<double>(total_steps) / static_cast<double>(steps_per_epoch),
        steps_per_epoch,
        options.batch,
        accum_steps,
        micro_batch,
        options.world_size > 1 ? fmt::format(" x {} ranks", options.world_size)
                               : std::string()));
    log(fmt::format("run directory: {}", run_dir));
    if (!options.trial) {
      const bool resumed = maybe_resume();
      // A resumed run continues its metrics (restore() dropped the lines
      // after the checkpoint); a fresh one starts them.
      if (options.rank == 0) {
        metrics.open(
            fs::path(run_dir) / "metrics.jsonl",
            resumed ? std::ios::app : std::ios::trunc);
      }
    }
    if (device.is_cuda()) {
      cuda::reset_peak_memory(device.index());
    }
    telemetry::RunTelemetryOptions to;
    to.enabled = options.telemetry && !options.trial;
    to.interval_s = options.telemetry_interval_s;
    to.window_steps = options.diagnosis_window;
    to.tensorboard = options.tensorboard && options.rank == 0;
    to.metrics_port = options.rank == 0 ? options.metrics_port : 0;
    to.rank = options.rank;
    to.world_size = options.world_size;
    if (group) {
      to.sum_over_ranks = [g = group](std::vector<double> v) {
        return g->allreduce_sum(std::move(v), "telemetry");
      };
    }
    telemetry = std::make_unique<telemetry::RunTelemetry>(
        to, device, options.rank == 0 ? run_dir : std::string());
    readback = std::make_unique<StepReadback>(
        options.readback_every > 0 ? options.readback_every
                                   : (device.is_cuda() ? 16 : 1),
        2);
    zero_norm =
        at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
    plan_graphs();

    TrainSummary s;
    s.device = device.str();
    s.precision = to_string(options.precision);
    std::vector<double> step_times;
    double wait_total = 0;
    double time_total = 0;
    bool checked_devices =
        false; // at this process's first step, resumed or not
    model->train();
    Progress progress(
        "train",
        static_cast<std::uint64_t>(total_steps),
        options.rank == 0 && options.progress_bar);
    if (next_batch + static_cast<std::size_t>(accum_steps) >
            loader->batches_per_epoch() ||
        next_batch >= static_cast<std::size_t>(steps_per_epoch * accum_steps)) {
      ++epoch;
      next_batch = 0;
    }
    loader->start_epoch(epoch, next_batch);
    const std::int64_t images_per_step = options.batch;
    Clock::time_point last_log = Clock::now();

    while (step < total_steps) {
      if (next_batch >=
          static_cast<std::size_t>(steps_per_epoch * accum_steps)) {
        ++epoch;
        next_batch = 0;
        loader->start_epoch(epoch, 0);
      }
      const Clock::time_point t0 = Clock::now();
      const std::size_t step_start = next_batch;
      if (options.oom_recovery && !options.trial) {
        save_step_state();
      }
      telemetry->begin_step();
      MicroBatchesResult micro;
      std::optional<std::string> oom;
      // The graph's step applies the update inside, at this LR (graphs run
      // without a loss scaler, so no step is skipped).
      const bool graph = graph_path();
      const double graph_lr =
          graph ? learning_rate(options.schedule, step, total_steps) : 0;
      try {
        micro = graph ? run_graphed_step(graph_lr) : run_micro_batches();
      } catch (const c10::OutOfMemoryError& e) {
        if (options.trial) {
          throw; // the batch finder's answer
        }
        oom = first_line(e.what());
      }
      bool stopping = stop != nullptr && stop->load();
      if (oom && !options.oom_recovery) {
        recover_from_oom(*oom, step_start); // throws: no collective first
      }
      if (group) {
        // Every rank starts every gradient bucket, OOM or not, so the
        // collectives line up; then one all-reduce agrees on what any rank
        // saw: an OOM (all ranks shrink the micro-batch together) and a stop
        // request.
        phase(dist::RankPhase::AllReduce);
        reducer->launch_rest();
        const std::int64_t agreed = group->allreduce_max(
            (oom ? 1 : 0) | (stopping ? 2 : 0), "step agreement");
        if ((agreed & 1) != 0 && !oom) {
          oom = "out of memory on another rank";
        }
        stopping = (agreed & 2) != 0;
      }
      if (oom) {
        if (reducer) {
          reducer->discard();
        }
        recover_from_oom(*oom, step_start);
        if (graphed && accum_steps > 1) {
          graphed->fall_back(fmt::format(
              "OOM recovery split the batch into {} micro-batches",
              accum_steps));
        }
        continue; // the same step again
      }
      if (reducer) {
        reducer->finish(); // the mean gradients
        telemetry->end_phase(telemetry::Phase::AllReduce);
      }
      phase(dist::RankPhase::Optimizer);
      const double wait = micro.wait;
      std::optional<data::Batch>& first_batch = micro.first_batch;
      // Read now (before the update, so that a non-finite loss is never
      // applied) or later through the readback (no synchronization).
      const bool immediate = readback->every() == 1 && !graph;
      const double loss_value =
          immediate ? micro.loss_sum.item<double>() : std::nan("");
      bool skip = false;
      if (scaler->enabled()) {
        skip = scaler->update(scaler->unscale(params));
        if (scaler->collapsed()) {
          const std::string first = first_non_finite_gradient(named_params);
          checkpoint_now();
          throw Error(
              fmt::format(
                  "step {}: fp16 loss scaling collapsed (scale {}, {} steps skipped in a row); first non-finite gradient: {}",
                  step + 1,
                  scaler->current_scale(),
                  scaler->consecutive_skips(),
                  first.empty() ? std::string("none found") : first),
              "lower the learning rate or enable --clip-grad-norm" +
                  bf16_advice());
        }
      } else if (immediate && !std::isfinite(loss_value)) {
        const std::string first = first_non_finite_gradient(named_params);
        optimizer->zero_grad();
        const std::string saved = checkpoint_now();
        throw Error(
            fmt::format(
                "step {}: the loss is {} (first non-finite gradient: {}); the last good state is in {}",
                step + 1,
                loss_value,
                first.empty() ? std::string("none") : first,
                saved.empty() ? std::string("rank 0's checkpoint") : saved),
            "lower the learning rate, add --clip-grad-norm or --warmup-steps, and check the data for bad labels");
      }
      at::Tensor grad_norm = zero_norm;
      double lr = 0;
      if (graph) { // the graph's body ran the optimizer step
        lr = graph_lr;
        grad_norm = static_grad_norm;
        optimizer->count_device_step();
      } else if (!skip) {
        if (options.clip_grad_norm > 0) {
          grad_norm = clip_gradients();
        }
        lr = learning_rate(
            options.schedule, step - scaler->skipped_steps(), total_steps);
        optimizer->step(lr);
      }
      if (!checked_devices) {
        check_devices(*first_batch);
        checked_devices = true;
      }
      if (!graph) {
        optimizer->zero_grad(); // a graph's body zeroes them as it starts
        telemetry->end_phase(telemetry::Phase::Optimizer);
      }
      ++step;

      const double dt = seconds_since(t0);
      step_times.push_back(dt);
      wait_total += wait;
      time_total += dt;
      nlohmann::json line = {
          {"step", step},
          {"epoch", epoch},
          {"lr", lr},
          {"step_time_ms", dt * 1e3},
          {"images_per_s", static_cast<double>(images_per_step) / dt},
          {"data_wait_ms", wait * 1e3}};
      if (scaler->enabled()) {
        line["loss_scale"] = scaler->current_scale();
        line["skipped"] = skip;
      }
      if (immediate) {
        line["loss"] = loss_value;
        note_loss(loss_value);
        if (options.clip_grad_norm > 0) {
          line["grad_norm"] = grad_norm.item<double>();
        }
      }
      const telemetry::StepOutput t = telemetry->end_step(
          {step,
           loss_value,
           lr,
           dt,
           static_cast<double>(images_per_step) / dt});
      if (!t.phases_ms.is_null()) {
        line["phases_ms"] = t.phases_ms;
      }
      pending_lines.push_back({std::move(line), step, !immediate});
      if (t.window) {
        pending_lines.push_back({*t.window, step, false});
      }
      if (immediate) {
        write_ready_lines();
      } else {
        readback->record(step, {micro.loss_sum, grad_norm});
        take_losses(
            readback->every() == 1 ? readback->drain() : readback->poll());
      }
      if (!t.log.empty()) {
        log(t.log);
      }
      progress.update(
          static_cast<std::uint64_t>(step),
          fmt::format(
              "loss {}  {:.0f} img/s",
              loss_text(),
              static_cast<double>(images_per_step) / dt));
      if (!options.progress_bar && options.log_every_s > 0 &&
          seconds_since(last_log) >= options.log_every_s) {
        last_log = Clock::now();
        log(fmt::format(
            "step {}/{}  epoch {}  loss {}  lr {:.3g}  {:.0f} img/s",
            step,
            total_steps,
            epoch,
            loss_text(),
            lr,
            static_cast<double>(images_per_step) / dt));
      }

      const bool epoch_end = step % steps_per_epoch == 0;
      const bool last = step == total_steps;
      const bool eval_due = val_data && options.evaluate && options.rank == 0 &&
          (last ||
           (options.eval_every > 0 ? step % options.eval_every == 0
                                   : epoch_end));
      if (eval_due) {
        take_losses(readback->drain());
        phase(dist::RankPhase::Evaluation);
        const EvalResult r = evaluate();
        write_metrics(
            {{"step", step},
             {"val_loss", r.loss},
             {"val_accuracy", r.accuracy},
             {"val_samples", r.samples}});
        log(fmt::format(
            "step {}: val_loss {:.4f}  val_accuracy {:.2f}%",
            step,
            r.loss,
            100 * r.accuracy));
        if (last) {
          s.eval = r;
        }
      }
      const bool checkpoint_due = last || stopping ||
          (options.checkpoint_every > 0 ? step % options.checkpoint_every == 0
                                        : epoch_end);
      if (checkpoint_due) {
        take_losses(readback->drain()); // a non-finite loss stops before it
        phase(dist::RankPhase::Checkpoint);
        metrics.flush();
        checkpoint_now();
      }
      if (stopping && !last) {
        s.stopped_early = true;
        log(fmt::format(
            "stopped at step {}: checkpoint {}\nresume with: hotloop train ... --out {} --resume auto",
            step,
            last_checkpoint,
            run_dir));
        break;
      }
    }
    take_losses(readback->drain());
    progress.finish();
    phase(dist::RankPhase::Finished);

    // Steady state: leave out the first steps (allocator warm-up, cuDNN
    // autotuning, the loader filling its queue).
    const std::size_t warm = std::min(
        step_times.size() / 10 + 2,
        step_times.size() > 3 ? step_times.size() - 3 : 0);
    std::vector<double> steady(
        step_times.begin() + static_cast<std::ptrdiff_t>(warm),
        step_times.end());
    std::vector<double> rates;
    for (const double t : steady) {
      rates.push_back(static_cast<double>(images_per_step) / t);
    }
    s.steps = step;
    s.epochs = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
    s.train_loss = recent_losses.empty()
        ? 0
        : std::accumulate(recent_losses.begin(), recent_losses.end(), 0.0) /
            static_cast<double>(recent_losses.size());
    s.images_per_s = percentile(rates, 0.5);
    s.step_time_ms_median = percentile(steady, 0.5) * 1e3;
    s.step_time_ms_p90 = percentile(steady, 0.9) * 1e3;
    s.data_wait_fraction = time_total > 0 ? wait_total / time_total : 0;
    if (device.is_cuda()) {
      const cuda::MemoryStats m = cuda::memory_stats(device.index());
      s.peak_allocated_bytes = m.peak_allocated;
      s.peak_reserved_bytes = m.peak_reserved;
    }
    s.peak_rss_bytes = peak_rss_bytes();
    s.skipped_steps = scaler->skipped_steps();
    s.micro_batch = micro_batch;
    s.accum_steps = accum_steps;
    s.oom_recoveries = oom_recoveries;
    s.bad_samples = loader->stats().bad_samples;
    s.wall_s = seconds_since(start);
    s.last_checkpoint = last_checkpoint;
    s.telemetry = telemetry->finish(s.wall_s);
    telemetry.reset();
    if (graphed) {
      s.graph_replays = graphed->replays();
      s.graph_off_reason = graphed->fallback_reason();
    } else {
      s.graph_off_reason = graph_decision_reason;
    }
    graphed.reset();
    graph_stream.reset();
    if (options.rank == 0 && !options.trial) {
      std::ofstream(fs::path(run_dir) / "summary.json")
          << s.to_json().dump(2) << '\n';
    }
    return s;
  }
};

Trainer::Trainer(
    std::shared_ptr<model::Model> model,
    std::shared_ptr<const data::Dataset> train,
    std::shared_ptr<const data::Dataset> val,
    TrainerOptions options,
    std::shared_ptr<dist::ProcessGroup> group)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->group = std::move(group);
  impl_->model = std::move(model);
  impl_->train_data = std::move(train);
  impl_->val_data = std::move(val);
  impl_->setup();
}

Trainer::~Trainer() = default;

TrainSummary Trainer::fit(const std::atomic<bool>* stop) {
  return impl_->fit(stop);
}

EvalResult Trainer::evaluate() {
  return impl_->evaluate();
}

const TrainerOptions& Trainer::options() const {
  return impl_->options;
}

const std::string& Trainer::run_dir() const {
  return impl_->run_dir;
}

} // namespace hotloop::train
