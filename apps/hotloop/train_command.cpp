// `hotloop train`: flags (or --config FILE.toml with the same keys) -> the
// Trainer. Command-line flags override the file; unknown keys, wrong types
// and values out of range exit 2 before any work.

#include <fmt/format.h>
#include <torch/utils.h>

#include <fmt/ranges.h>

#include "cli_common.h"
#include "hotloop/core/stop_signal.h"
#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/model.h"
#include "hotloop/parallel/job.h"
#include "hotloop/train/recipe.h"
#include "hotloop/train/resolve_run.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/trainer.h"
#include "option_sources.h"
#include "run_option_flags.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct TrainFlags {
  train::RunOptions run;
  ConfigFlags config;
};

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
  train::RunOptions& run = f.run;
  train::TrainerOptions& o = run.trainer;
  record_sources(cmd, f.config.keys, run);
  run.callbacks.console.progress_bar = stdout_wants_color();

  // Data parallel when a launcher (torchrun, srun, hotloop launch) says so.
  const parallel::Job job = parallel::join_job(run.job, o.device, o.threads);
  o.device = job.device;
  o.threads = job.threads;
  if (job.group) {
    o.rank = job.env.rank;
    o.world_size = job.env.world_size;
    run.callbacks.console.progress_bar =
        run.callbacks.console.progress_bar && o.rank == 0;
  }
  const bool talk = o.rank == 0;
  // --print-config writes TOML to stdout: the finder's lines go to stderr.
  std::FILE* progress = !talk ? nullptr : f.config.print ? stderr : stdout;
  const train::ResolvedRun resolved =
      train::resolve_run(run, resolve_context(run, job.group, progress));
  if (progress != nullptr) {
    if (resolved.found) {
      fmt::print(progress, "{}", batch_finder_table(*resolved.found));
    }
    for (const auto& note : resolved.notes) {
      fmt::print(progress, "{}\n", note);
    }
  }
  if (f.config.print) {
    if (talk) {
      fmt::print("{}", train::to_toml(run));
    }
    return 0;
  }
  const std::shared_ptr<const data::Dataset> val = run.eval
      ? open_val_data(run.data, o.seed, resolved.model.folder(), o.loader)
      : nullptr;
  const train::RunRecord record = train::record_of(run);

  if (talk) {
    fmt::print(
        "data: {}\nval:  {}\n",
        resolved.train->describe(),
        val ? val->describe() : std::string("none"));
    nlohmann::json config = o.to_json();
    config["options"].update(record.options);
    fmt::print("config:\n{}\n", config.dump(2));
    fmt::print("{}\n", describe_sources(run));
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
      resolved.train,
      val,
      o,
      {train::standard_callbacks(run.callbacks), job.group, record});
  if (resolved.found && talk) {
    train::RunFolder::write_json(
        train::RunFolder(trainer.run_dir()).batch_finder(),
        resolved.found->to_json());
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
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: mixed precision, accumulation, checkpoints, exact resume");
  add_config_flags(cmd, f->config);
  add_run_flags(cmd, f->run);
  cmd->footer(
      "Models (--model; also hf:DIR and torchscript:FILE):\n" +
      model::model_sizes_help() +
      "Recipes (what a built-in model trains with unless a flag or --config says otherwise; the run prints each value's source), at --batch 128:\n" +
      train::recipes_help(128) +
      "  SGD's --lr scales with the batch: 0.1 x batch / 128 (Goyal et al.)\n"
      "  every language model on a GPU of compute capability 8.0 and up: --precision bf16\n"
      "Examples:\n"
      "  hotloop train --model cnn-small --epochs 3\n"
      "  hotloop train --model gpt-nano --data text:fortunes\n"
      "  hotloop train --init path/to/hf-folder --data tokens:ids.bin --context 512\n"
      "  hotloop train --init path/to/hf-folder --data instruct:chat.jsonl --lora-rank 16\n"
      "  hotloop train --config run.toml --out runs/a --resume auto\n"
      "  hotloop train --model resnet18-small --batch auto --print-config > run.toml\n"
      "SIGINT/SIGTERM finish the step, write a checkpoint and exit 0; --resume auto continues.");
  cmd->callback(
      [f, cmd, &action] { action = [f, cmd] { return run_train(*f, *cmd); }; });
}

} // namespace hotloop::cli
