// `hotloop train`: flags (or --config FILE.toml with the same keys) -> the
// Trainer. Command-line flags override the file; unknown keys, wrong types
// and values out of range exit 2 before any work.

#include <fmt/format.h>
#include <torch/utils.h>

#include <fmt/ranges.h>

#include <charconv>
#include <fstream>
#include <map>
#include <set>

#include "cli_common.h"
#include "hotloop/core/stop_signal.h"
#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/gpt.h"
#include "hotloop/parallel/job.h"
#include "hotloop/train/recipe.h"
#include "hotloop/train/trainer.h"
#include "option_sources.h"
#include "train_setup.h"
#include "training_flags.h"

namespace hotloop::cli {

namespace {

struct TrainFlags {
  train::TrainerOptions options;
  train::CallbackOptions callbacks;
  TrainingFlags common;
  std::string loss_scaling = "auto";
  std::string schedule = "cosine";
  std::string freeze = "none";
  std::string cuda_graphs = "auto";
  std::string cpu_conv = "auto";
  std::string augment = "default";
  std::string on_bad_sample = "skip";
  std::string batch = "64"; // or auto
  std::string micro_batch = "0"; // or auto
  bool no_cudnn_benchmark = false;
  bool no_eval = false;
  std::string config;
  std::string config_keys; // set by expand_config_file (option_sources.h)
  parallel::JobOptions job;
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

std::string describe_eval(const train::TrainSummary& s) {
  if (!s.eval) {
    return {};
  }
  const train::EvalResult& e = *s.eval;
  if (e.bits_per_byte) {
    return fmt::format(
        "; val_loss {:.4f} ({:.3f} bits per byte)", e.loss, *e.bits_per_byte);
  }
  if (e.perplexity) {
    return fmt::format(
        "; val_loss {:.4f} (perplexity {:.1f})", e.loss, *e.perplexity);
  }
  return fmt::format(
      "; val_loss {:.4f}, val_accuracy {:.2f}%", e.loss, 100 * e.accuracy);
}

std::string describe_rate(const train::TrainSummary& s) {
  const std::string rate = s.tokens_per_s > 0
      ? fmt::format("{:.0f} tokens/s", s.tokens_per_s)
      : fmt::format("{:.0f} images/s", s.images_per_s);
  if (s.mfu) {
    return fmt::format("{}, MFU {:.1f}%", rate, 100 * *s.mfu);
  }
  if (s.model_flops_per_s > 0) {
    return fmt::format("{}, {:.2f} TFLOP/s", rate, s.model_flops_per_s / 1e12);
  }
  return rate;
}

int run_train(TrainFlags& f, const CLI::App& cmd) {
  train::TrainerOptions& o = f.options;
  f.common.apply(o);
  o.loss_scaling = train::parse_loss_scaling(f.loss_scaling);
  o.schedule.kind = train::parse_schedule(f.schedule);
  o.freeze_backbone = model::parse_freeze(f.freeze) == model::Freeze::Backbone;
  if (model::parse_freeze(f.freeze) == model::Freeze::Patterns) {
    o.freeze_patterns = model::freeze_patterns(f.freeze);
  }
  o.cudnn_benchmark = !f.no_cudnn_benchmark;
  o.cuda_graphs = train::parse_cuda_graphs(f.cuda_graphs);
  o.cpu_conv = model::parse_cpu_conv(f.cpu_conv);
  o.loader.augment = parse_augment(f.augment);
  o.loader.on_bad_sample = pick<data::BadSamplePolicy>(
      "on-bad-sample",
      f.on_bad_sample,
      {{"skip", data::BadSamplePolicy::Skip},
       {"fail", data::BadSamplePolicy::Fail}});
  if (o.out_dir.empty()) {
    o.out_dir = train::default_run_dir();
  }
  // The model's recipe fills what the user left unset; its learning rate
  // may follow the batch, settled below when the batch is "auto".
  const std::set<std::string> given = given_options(cmd);
  const std::optional<train::OptimizerKind> chosen = given.contains("optimizer")
      ? std::optional(o.optimizer.kind)
      : std::nullopt;
  train::apply_recipe(
      train::recipe_for(
          o.model.name, parse_batch("batch", f.batch, 1).value_or(64), chosen),
      o,
      given);
  f.callbacks.console.progress_bar = stdout_wants_color();
  f.callbacks.validate();

  // Data parallel when a launcher (torchrun, srun, hotloop launch) says so.
  const parallel::Job job = parallel::join_job(f.job, o.device, o.threads);
  o.device = job.device;
  o.threads = job.threads;
  if (job.group) {
    o.rank = job.env.rank;
    o.world_size = job.env.world_size;
    f.callbacks.console.progress_bar =
        f.callbacks.console.progress_bar && o.rank == 0;
  }
  const bool talk = o.rank == 0;

  // The data decides the defaults of the model's input and output.
  f.common.data = data_for(o.model.name, f.common.data, given.contains("data"));
  const TrainData data = open_train_data(f.common.data, o.seed, !f.no_eval);
  o.batch = parse_batch("batch", f.batch, 1).value_or(1);
  o.micro_batch = parse_batch("micro-batch", f.micro_batch, 0).value_or(0);
  fit_model_to_data(o, *data.train, f.common.in_channels, f.common.num_classes);
  const train::ResolvedBatch batch = resolve_auto_batch(
      {parse_batch("batch", f.batch, 1),
       parse_batch("micro-batch", f.micro_batch, 0)},
      o,
      data.train,
      job.group.get());
  o.batch = batch.batch;
  o.micro_batch = batch.micro_batch;
  const train::Recipe recipe = train::recipe_for(o.model.name, o.batch, chosen);
  const std::vector<std::string> from_recipe =
      train::apply_recipe(recipe, o, given);
  o.option_sources = option_sources(cmd, f.config_keys, from_recipe);
  o.validate();

  if (talk) {
    fmt::print(
        "data: {}\nval:  {}\n",
        data.train->describe(),
        data.val ? data.val->describe() : std::string("none"));
    fmt::print("config:\n{}\n", o.to_json().dump(2));
    std::map<std::string, std::string> recipe_values;
    for (const auto& v : recipe.values) {
      recipe_values[v.key] = v.value;
    }
    fmt::print(
        "{}\n",
        describe_sources(cmd, o.option_sources, o.model.name, recipe_values));
    if (job.group) {
      fmt::print(
          "data parallel: {} rank(s) ({}, {}), global batch {}\n",
          job.env.world_size,
          job.env.source,
          job.backend,
          o.batch);
    }
  }
  torch::manual_seed(o.seed);
  train::Trainer trainer(
      model::make_model(o.model),
      data.train,
      data.val,
      o,
      {train::standard_callbacks(f.callbacks), job.group});
  if (talk) {
    keep_tokenizer(f.common.data, trainer.run_dir());
  }
  if (batch.found && talk) {
    std::ofstream(trainer.run_dir() + "/batch_finder.json")
        << batch.found->to_json().dump(2) << '\n';
  }
  StopSignal stop;
  const train::TrainSummary s = trainer.fit(stop.flag());
  if (!talk) {
    return 0;
  }
  fmt::print(
      "done: {} steps in {:.1f} s; train_loss {:.4f}{}; {} (median); data wait {:.1f}%; skipped {}; bad samples {}{}\n"
      "summary: {}/summary.json\n",
      s.steps,
      s.wall_s,
      s.train_loss,
      describe_eval(s),
      describe_rate(s),
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
  if (!s.from_before_resume.empty()) {
    fmt::print(
        "resumed at step {}: from the part before it: {}\n",
        s.resumed_at,
        fmt::join(s.from_before_resume, ", "));
  }
  return 0;
}

} // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<TrainFlags>();
  train::TrainerOptions& o = f->options;
  train::CallbackOptions& c = f->callbacks;
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: mixed precision, accumulation, checkpoints, exact resume");
  // Read by expand_config_file() before parsing (config_file.h); listed here
  // for --help.
  cmd->add_option(
      "--config",
      f->config,
      "A TOML file with the same keys as the flags (micro-batch = 32); flags override it");
  add_training_flags(cmd, f->common, o);
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
      "--loss-scaling",
      f->loss_scaling,
      "Dynamic loss scaling: auto (fp16 only), on (any precision: overflow check and skip) or off");
  cmd->add_option(
      "--lr",
      o.schedule.lr,
      "Peak learning rate (a built-in model's recipe sets it: see below)");
  cmd->add_option(
      "--head-lr", o.head_lr, "The head's learning rate; < 0: --lr");
  cmd->add_option(
      "--momentum",
      o.optimizer.momentum,
      "SGD momentum (a built-in model's recipe sets it: see below)");
  cmd->add_flag(
      "--nesterov",
      o.optimizer.nesterov,
      "SGD with Nesterov momentum; --nesterov=false turns it off (a built-in model's recipe sets it: see below)");
  cmd->add_option("--beta1", o.optimizer.beta1, "AdamW's first-moment decay");
  cmd->add_option(
      "--beta2",
      o.optimizer.beta2,
      "AdamW's second-moment decay (a GPT's recipe sets it: see below)");
  cmd->add_option(
      "--weight-decay",
      o.optimizer.weight_decay,
      "L2 (SGD) or decoupled (AdamW) weight decay (a built-in model's recipe sets it: see below)");
  cmd->add_option(
      "--schedule",
      f->schedule,
      "constant, cosine, step or onecycle (a built-in model's recipe sets it: see below)");
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
      "--label-smoothing",
      o.label_smoothing,
      "Cross-entropy label smoothing (a built-in model's recipe sets it: see below)");
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
      "--freeze",
      f->freeze,
      "backbone (train the head only), none, or name globs: 'features.*,classifier.0.*'");
  cmd->add_option(
      "--telemetry",
      c.telemetry.enabled,
      "Sample the GPU and host, time the step phases, diagnose every window (false: none of it)");
  cmd->add_option(
      "--telemetry-interval",
      c.telemetry.interval_s,
      "Seconds between GPU/host samples (telemetry.jsonl)");
  cmd->add_option(
      "--diagnosis-window",
      c.telemetry.diagnosis_window,
      "Steps per diagnosis (input-bound, throttled, ...)");
  cmd->add_option(
      "--tensorboard",
      c.tensorboard,
      "Write TensorBoard event files into the run directory");
  cmd->add_option(
      "--metrics-port",
      c.metrics_port,
      "Serve Prometheus metrics on 127.0.0.1:PORT; 0: off");
  cmd->add_option(
      "--profile",
      c.profile.steps,
      "Record steps with LibTorch's profiler into RUN/profile/*.pt.trace.json (Perfetto, TensorBoard): A-B or N (steps as the log numbers them), or auto (a few steps after a slow step or when the diagnosis turns from healthy); default: off");
  cmd->add_option(
      "--dist-backend",
      f->job.backend,
      "Data parallel (under torchrun, srun or hotloop launch): auto (nccl on CUDA, gloo on the CPU), gloo or nccl");
  cmd->add_option(
      "--dist-timeout",
      f->job.timeout_s,
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
      "Checkpoints kept (the newest); 0: none written");
  cmd->add_option(
      "--resume",
      o.resume,
      "auto (newest valid checkpoint in --out) or a checkpoint file");
  cmd->add_option(
      "--prefetch",
      o.loader.prefetch_batches,
      "Ready batches held ahead of the step");
  cmd->add_option(
      "--augment",
      f->augment,
      "default (random crop/flip) or none (a built-in model's recipe sets it: see below)");
  cmd->add_option(
      "--on-bad-sample", f->on_bad_sample, "skip (count and log once) or fail");
  cmd->add_option(
      "--log-every",
      c.console.log_every_s,
      "Seconds between plain progress lines off a terminal; 0: none");
  cmd->footer(
      "Recipes (what a built-in model trains with unless a flag or --config says otherwise; the run prints each value's source):\n"
      "  mlp, cnn-small  --optimizer adamw --lr 1e-3 (cnn-small: 3e-3) --schedule onecycle --augment none\n"
      "  resnet*         --optimizer sgd --momentum 0.9 --nesterov --lr 0.1*batch/128 --schedule onecycle --weight-decay 5e-4 --label-smoothing 0.1\n"
      "  gpt-*           --optimizer adamw --lr 1e-2 (gpt-mini 1e-3, gpt2 6e-4, gpt2-medium 3e-4) --min-lr lr/10 --beta2 0.95 --weight-decay 0.1 (matrices only) --schedule cosine --warmup-steps 50 (gpt2*: 700) --clip-grad-norm 1; gpt-nano, gpt-mini: --epochs 3\n"
      "  With the other --optimizer: that optimizer's values (adamw: lr 1e-3, cnn-small 3e-3; sgd: as for resnet*).\n"
      "Examples:\n"
      "  hotloop train --model cnn-small --epochs 3\n"
      "  hotloop train --model gpt-nano --data text:fortunes\n"
      "  hotloop train --config run.toml --out runs/a --resume auto\n"
      "SIGINT/SIGTERM finish the step, write a checkpoint and exit 0; --resume auto continues.");
  cmd->add_option("--config-keys", f->config_keys)->group("");
  cmd->callback(
      [f, cmd, &action] { action = [f, cmd] { return run_train(*f, *cmd); }; });
}

} // namespace hotloop::cli
