// `hotloop train`: flags (or --config FILE.toml with the same keys) -> the
// Trainer. Command-line flags override the file; unknown keys, wrong types
// and values out of range exit 2 before any work.

#include <fmt/format.h>
#include <torch/utils.h>

#include <charconv>
#include <fstream>
#include "cli_common.h"

#include "hotloop/core/cpus.h"
#include "hotloop/core/stop_signal.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/dist/dist_env.h"
#include "hotloop/dist/process_group.h"
#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/train/trainer.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct TrainFlags {
  train::TrainerOptions options;
  std::string data = "fashion-mnist";
  std::string precision = "fp32";
  std::string loss_scaling = "auto";
  std::string optimizer = "sgd";
  std::string schedule = "cosine";
  std::string freeze = "none";
  std::string activation_checkpointing = "none";
  std::string cuda_graphs = "auto";
  std::string cpu_conv = "auto";
  std::string augment = "default";
  std::string augment_device = "cpu";
  std::string resident = "auto";
  std::string on_bad_sample = "skip";
  std::string batch = "64"; // or auto
  std::string micro_batch = "0"; // or auto
  std::int64_t num_classes = 0;
  std::int64_t in_channels = 0;
  bool no_cudnn_benchmark = false;
  bool no_eval = false;
  std::string config;
  std::string dist_backend = "auto";
  double dist_timeout_s = 300;
};

// A batch flag's value: a count, or nullopt for "auto".
std::optional<std::int64_t> parse_batch(
    const std::string& key,
    const std::string& text,
    std::int64_t min) {
  if (text == "auto") {
    return std::nullopt;
  }
  std::int64_t n = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size() || n < min) {
    throw UsageError(fmt::format(
        "--{} {}: expected a number of at least {}, or auto", key, text, min));
  }
  return n;
}

// --batch auto / --micro-batch auto: the batch-size finder decides, on the
// run's own model, data path and precision.
std::optional<train::BatchFinderResult> resolve_auto_batch(
    TrainFlags& f,
    const std::shared_ptr<const data::Dataset>& train_set,
    dist::ProcessGroup* group) {
  train::TrainerOptions& o = f.options;
  const auto batch = parse_batch("batch", f.batch, 1);
  const auto micro = parse_batch("micro-batch", f.micro_batch, 0);
  if (batch && micro) {
    o.batch = *batch;
    o.micro_batch = *micro;
    return std::nullopt;
  }
  if (!batch && micro.value_or(0) != 0) {
    throw UsageError(
        "--batch auto with a fixed --micro-batch: the finder sets both",
        "give --batch N --micro-batch auto to keep an effective batch of N");
  }
  train::BatchFinderOptions finder;
  finder.trainer = o;
  finder.trainer.batch = 1; // validated per trial
  finder.trainer.micro_batch = 0;
  const int world = group ? group->size() : 1;
  if (batch) {
    finder.max_batch = *batch / world;
  }
  train::BatchFinderResult r = find_batch(finder, train_set, stdout);
  fmt::print("{}", batch_finder_table(r));
  if (group) {
    // Every rank trains with the smallest rank's finding.
    const std::int64_t agreed =
        -group->allreduce_max(-r.recommended, "batch finder agreement");
    if (agreed != r.recommended) {
      fmt::print(
          "batch finder: {} on every rank (the smallest rank's)\n", agreed);
      r.recommended = agreed;
    }
  }
  if (r.recommended < 1) {
    throw OutOfMemoryError(
        "the batch finder found no micro-batch that fits: " + r.reason);
  }
  if (batch) {
    // Keep the effective batch: the largest divisor of each rank's share up
    // to the finding.
    o.batch = *batch;
    o.micro_batch = r.recommended;
    while ((o.batch / world) % o.micro_batch != 0) {
      --o.micro_batch;
    }
    fmt::print(
        "micro-batch auto: {} ({} x {} = batch {})\n",
        o.micro_batch,
        o.batch / o.micro_batch,
        o.micro_batch,
        o.batch);
  } else {
    o.batch = r.recommended * world;
    o.micro_batch = 0;
    fmt::print("batch auto: {}\n", o.batch);
  }
  return r;
}

int run_train(TrainFlags& f) {
  train::TrainerOptions& o = f.options;
  o.precision = train::parse_precision(f.precision);
  o.loss_scaling = train::parse_loss_scaling(f.loss_scaling);
  o.optimizer.kind = train::parse_optimizer(f.optimizer);
  o.schedule.kind = train::parse_schedule(f.schedule);
  o.freeze_backbone = model::parse_freeze(f.freeze) == model::Freeze::Backbone;
  o.cudnn_benchmark = !f.no_cudnn_benchmark;
  o.evaluate = !f.no_eval;
  o.loader.augment_on_device = parse_augment_device(f.augment_device);
  o.activation_checkpointing =
      model::parse_checkpointing(f.activation_checkpointing);
  o.cuda_graphs = train::parse_cuda_graphs(f.cuda_graphs);
  o.cpu_conv = model::parse_cpu_conv(f.cpu_conv);
  o.loader.augment = parse_augment(f.augment);
  o.loader.resident = parse_resident(f.resident);
  o.loader.on_bad_sample = pick<data::BadSamplePolicy>(
      "on-bad-sample",
      f.on_bad_sample,
      {{"skip", data::BadSamplePolicy::Skip},
       {"fail", data::BadSamplePolicy::Fail}});
  o.progress_bar = stdout_wants_color();

  // Data parallel when a launcher (torchrun, srun, hotloop launch) says so:
  // each rank on the GPU of its local rank.
  const dist::DistEnv env = dist::read_dist_env();
  std::shared_ptr<dist::ProcessGroup> group;
  if (env.launched()) {
    if (o.device == "auto" || o.device == "cuda") {
      o.device = at::hasCUDA() ? fmt::format("cuda:{}", env.local_rank) : "cpu";
    }
    dist::GroupOptions go;
    if (f.dist_backend == "auto") {
      f.dist_backend = o.device.starts_with("cuda") ? "nccl" : "gloo";
    }
    go.backend = pick<dist::Backend>(
        "dist-backend",
        f.dist_backend,
        {{"gloo", dist::Backend::Gloo}, {"nccl", dist::Backend::Nccl}});
    if (f.dist_timeout_s <= 0) {
      throw UsageError("--dist-timeout: must be positive (seconds)");
    }
    go.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(f.dist_timeout_s * 1000));
    if (o.device.starts_with("cuda:")) {
      cuda::set_current_device(std::stoi(o.device.substr(5)));
    }
    group = dist::ProcessGroup::create(env, go);
    if (o.threads == 0) {
      // The node's cores are shared by its ranks (torchrun sets
      // OMP_NUM_THREADS=1 for the same reason).
      o.threads =
          std::max(1, static_cast<int>(usable_cpus()) / env.local_world_size);
    }
    o.rank = env.rank;
    o.world_size = env.world_size;
    o.progress_bar = o.progress_bar && env.rank == 0;
  }
  const bool talk = o.rank == 0;

  // The data decides the defaults of the model's input and output.
  const TrainData data = open_train_data(f.data, o.seed, true);
  const auto& train_set = data.train;
  const auto& val_set = data.val;
  o.batch = parse_batch("batch", f.batch, 1).value_or(1);
  o.micro_batch = parse_batch("micro-batch", f.micro_batch, 0).value_or(0);
  fit_model_to_data(o, *train_set, f.in_channels, f.num_classes);
  const auto found = resolve_auto_batch(f, train_set, group.get());
  o.validate();

  if (talk) {
    fmt::print(
        "data: {}\nval:  {}\n",
        train_set->describe(),
        val_set ? val_set->describe() : std::string("none"));
    fmt::print("config:\n{}\n", o.to_json().dump(2));
    if (group) {
      fmt::print(
          "data parallel: {} rank(s) ({}, {}), global batch {}\n",
          env.world_size,
          env.source,
          f.dist_backend,
          o.batch);
    }
  }
  torch::manual_seed(o.seed);
  auto net = model::make_model(o.model);
  train::Trainer trainer(net, train_set, val_set, o, group);
  if (found && talk) {
    std::ofstream(trainer.run_dir() + "/batch_finder.json")
        << found->to_json().dump(2) << '\n';
  }
  StopSignal stop;
  const train::TrainSummary s = trainer.fit(stop.flag());
  if (!talk) {
    return 0;
  }
  fmt::print(
      "done: {} steps in {:.1f} s; train_loss {:.4f}{}; {:.0f} images/s (median); data wait {:.1f}%; skipped {}; bad samples {}{}\n"
      "summary: {}/summary.json\n",
      s.steps,
      s.wall_s,
      s.train_loss,
      s.eval ? fmt::format(
                   "; val_loss {:.4f}, val_accuracy {:.2f}%",
                   s.eval->loss,
                   100 * s.eval->accuracy)
             : std::string(),
      s.images_per_s,
      100 * s.data_wait_fraction,
      s.skipped_steps,
      s.bad_samples,
      s.oom_recoveries > 0
          ? fmt::format(
                "; {} OOM recoveries: micro-batch {} x {} accumulation",
                s.oom_recoveries,
                s.micro_batch,
                s.accum_steps)
          : std::string(),
      trainer.run_dir());
  return 0;
}

} // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<TrainFlags>();
  train::TrainerOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: mixed precision, accumulation, checkpoints, exact resume");
  // Read by expand_config_file() before parsing (config_file.h); listed here
  // for --help.
  cmd->add_option(
      "--config",
      f->config,
      "A TOML file with the same keys as the flags (micro-batch = 32); flags override it");

  cmd->add_option(
      "--data",
      f->data,
      "fashion-mnist[:DIR], folder:DIR, wds:DIR|GLOB, synthetic:N[xCxHxW]");
  cmd->add_option(
      "--model", o.model.name, "mlp, cnn-small, resnet18|34|50[-small]");
  cmd->add_option(
      "--num-classes",
      f->num_classes,
      "Outputs; 0: the data set's class count");
  cmd->add_option(
      "--in-channels", f->in_channels, "Input channels; 0: the data set's");
  cmd->add_flag(
      "--zero-init-residual",
      o.model.zero_init_residual,
      "Zero the last BatchNorm of each residual block");
  cmd->add_option("--epochs", o.epochs, "Epochs (ignored when --steps is set)");
  cmd->add_option("--steps", o.steps, "Optimizer steps; 0: --epochs decides");
  cmd->add_option(
      "--batch",
      f->batch,
      "Global batch per optimizer step; auto: the batch-size finder's recommendation");
  cmd->add_option(
      "--micro-batch",
      f->micro_batch,
      "Samples per forward/backward; 0: the whole batch (no accumulation); auto: the finder's, dividing --batch");
  cmd->add_option(
      "--oom-recovery",
      o.oom_recovery,
      "On out of memory: halve the micro-batch, double accumulation, redo the step");
  cmd->add_option(
      "--memory-fraction",
      o.memory_fraction,
      "Cap this process's share of the GPU's memory (0 < F <= 1); 0: no cap");
  cmd->add_option(
      "--precision",
      f->precision,
      "fp32, tf32, bf16 (autocast; CPU too) or fp16 (autocast + loss scaling; CUDA)");
  cmd->add_option(
      "--loss-scaling",
      f->loss_scaling,
      "Dynamic loss scaling: auto (fp16 only), on (any precision: overflow check and skip) or off");
  cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  cmd->add_option(
      "--threads", o.threads, "CPU threads for the math; 0: the usable cores");
  cmd->add_option(
      "--seed", o.seed, "Seed: initialization, shuffle order, augmentation");
  cmd->add_option("--optimizer", f->optimizer, "sgd or adamw");
  cmd->add_option("--lr", o.schedule.lr, "Peak learning rate");
  cmd->add_option(
      "--head-lr", o.head_lr, "The head's learning rate; < 0: --lr");
  cmd->add_option("--momentum", o.optimizer.momentum, "SGD momentum");
  cmd->add_flag(
      "--nesterov", o.optimizer.nesterov, "SGD with Nesterov momentum");
  cmd->add_option(
      "--weight-decay",
      o.optimizer.weight_decay,
      "L2 (SGD) or decoupled (AdamW) weight decay");
  cmd->add_option(
      "--schedule", f->schedule, "constant, cosine, step or onecycle");
  cmd->add_option(
      "--warmup-steps",
      o.schedule.warmup_steps,
      "Linear warmup (constant, cosine, step)");
  cmd->add_option(
      "--min-lr", o.schedule.min_lr, "Cosine's final learning rate");
  cmd->add_option(
      "--step-size",
      o.schedule.step_size,
      "step: multiply the LR by --gamma every N steps");
  cmd->add_option("--gamma", o.schedule.gamma, "step schedule's factor");
  cmd->add_option(
      "--clip-grad-norm",
      o.clip_grad_norm,
      "Clip the global gradient norm; 0: off");
  cmd->add_option(
      "--label-smoothing", o.label_smoothing, "Cross-entropy label smoothing");
  cmd->add_option(
      "--activation-checkpointing",
      f->activation_checkpointing,
      "none, stages (recompute each ResNet stage in backward), all (the stem too) or blocks (each residual block on its own)");
  cmd->add_option(
      "--cpu-conv",
      f->cpu_conv,
      "Convolutions on the CPU: auto (im2col + GEMM where the output map is at most 4x4 pixels, oneDNN elsewhere), onednn, or gemm (wherever the layer allows)");
  cmd->add_option(
      "--cuda-graphs",
      f->cuda_graphs,
      "auto (capture the whole step as one CUDA graph when the run allows it, else eager with the reason logged), on (an error when it cannot) or off");
  cmd->add_option(
      "--readback-every",
      o.readback_every,
      "Steps between reading losses back to the host, without waiting for the GPU (metrics lines and the non-finite check see them then); 1: every step, before the update; 0: 1 on the CPU, 16 on CUDA");
  cmd->add_option(
      "--channels-last",
      o.channels_last,
      "NHWC memory format for convolutions (true: faster on the CPU and with tensor cores)");
  cmd->add_flag(
      "--no-cudnn-benchmark",
      f->no_cudnn_benchmark,
      "Turn off cuDNN's autotuner (on by default on CUDA)");
  cmd->add_option(
      "--init",
      o.init,
      "Start from these weights (.safetensors or torch.save state_dict)");
  cmd->add_option(
      "--init-strict",
      o.init_strict,
      "false: load what matches --init and report the rest");
  cmd->add_option(
      "--freeze", f->freeze, "backbone (train the head only) or none");
  cmd->add_option(
      "--telemetry",
      o.telemetry,
      "Sample the GPU and host, time the step phases, diagnose every window (false: none of it)");
  cmd->add_option(
      "--telemetry-interval",
      o.telemetry_interval_s,
      "Seconds between GPU/host samples (telemetry.jsonl)");
  cmd->add_option(
      "--diagnosis-window",
      o.diagnosis_window,
      "Steps per diagnosis (input-bound, throttled, ...)");
  cmd->add_option(
      "--tensorboard",
      o.tensorboard,
      "Write TensorBoard event files into the run directory");
  cmd->add_option(
      "--metrics-port",
      o.metrics_port,
      "Serve Prometheus metrics on 127.0.0.1:PORT; 0: off");
  cmd->add_option(
      "--dist-backend",
      f->dist_backend,
      "Data parallel (under torchrun, srun or hotloop launch): auto (nccl on CUDA, gloo on the CPU), gloo or nccl");
  cmd->add_option(
      "--dist-timeout",
      f->dist_timeout_s,
      "Seconds a rank waits for the others (rendezvous, collectives) before it stops with an error");
  cmd->add_option(
      "--sync-batchnorm",
      o.sync_batchnorm,
      "Data parallel: BatchNorm statistics over the global batch, not each rank's share (turns OOM recovery off: the collectives inside forward cannot be realigned after one rank fails)");
  cmd->add_option(
      "--overlap-allreduce",
      o.overlap_allreduce,
      "Data parallel: start each gradient bucket's all-reduce during backward as soon as its gradients are ready (false: all after backward)");
  cmd->add_option(
      "--bucket-mb", o.bucket_mb, "Data parallel: gradient bucket size in MiB");
  cmd->add_flag("--no-eval", f->no_eval, "No evaluation (throughput runs)");
  cmd->add_option(
      "--eval-every",
      o.eval_every,
      "Evaluate every N steps; 0: each epoch's end");
  cmd->add_option("--out", o.out_dir, "Run directory; empty: runs/<timestamp>");
  cmd->add_option(
      "--checkpoint-every",
      o.checkpoint_every,
      "Checkpoint every N steps; 0: each epoch's end");
  cmd->add_option(
      "--keep-checkpoints",
      o.keep_checkpoints,
      "Checkpoints kept (the newest)");
  cmd->add_option(
      "--resume",
      o.resume,
      "auto (newest valid checkpoint in --out) or a checkpoint file");
  cmd->add_option(
      "--workers", o.loader.workers, "Decode threads; 0: the usable cores");
  cmd->add_option(
      "--prefetch",
      o.loader.prefetch_batches,
      "Ready batches held ahead of the step");
  cmd->add_option(
      "--augment", f->augment, "default (random crop/flip) or none");
  cmd->add_option(
      "--augment-device",
      f->augment_device,
      "cpu (per sample, in the decode threads) or gpu (the whole batch on the GPU; needs --device cuda)");
  cmd->add_option(
      "--size",
      o.loader.size,
      "Input height and width; 0: the data's native size (224 for photos)");
  cmd->add_option(
      "--resident",
      f->resident,
      "auto, on or off: decode the data set once into memory");
  cmd->add_option(
      "--on-bad-sample", f->on_bad_sample, "skip (count and log once) or fail");
  cmd->add_option(
      "--log-every",
      o.log_every_s,
      "Seconds between plain progress lines off a terminal; 0: none");
  cmd->footer(
      "Examples:\n"
      "  hotloop train --model cnn-small --epochs 3 --optimizer adamw --lr 3e-3 --schedule onecycle --augment none\n"
      "  hotloop train --config run.toml --out runs/a --resume auto\n"
      "SIGINT/SIGTERM finish the step, write a checkpoint and exit 0; --resume auto continues.");
  cmd->callback([f, &action] { action = [f] { return run_train(*f); }; });
}

} // namespace hotloop::cli
