// `hotloop tune batch`: the largest micro-batch whose whole training step fits
// in memory, and the size to train with.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/resolve_run.h"
#include "option_sources.h"
#include "run_option_flags.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct TuneFlags {
  train::RunOptions run;
  train::BatchFinderOptions finder;
  bool json = false;
};

int run_tune_batch(TuneFlags& f, const CLI::App& cmd) {
  record_sources(cmd, "", f.run);
  // The run resolved as `hotloop train` would at a batch of 1 (the recipe's
  // optimizer, whose state takes memory; the model fitted to the data),
  // then the finder on it.
  f.run.trainer.batch = 1;
  f.run.trainer.micro_batch = 0;
  const train::ResolveContext context =
      resolve_context(f.run, nullptr, f.json ? stderr : stdout);
  const train::ResolvedRun resolved = train::resolve_run(f.run, context);
  const train::TrainerOptions& o = f.run.trainer;
  f.finder.trainer = o;
  context.on_finder_start(f.finder);
  const train::BatchFinderResult r = train::find_batch_size(
      train::model_factory(o), resolved.train, f.finder, context.on_trial);
  if (f.json) {
    fmt::print("{}\n", r.to_json().dump(2));
  } else {
    fmt::print("{}", batch_finder_table(r));
    if (r.recommended > 0) {
      fmt::print(
          "train with: hotloop train --model {} --batch {} ... (or --batch auto)\n",
          o.model.name,
          r.recommended);
    }
  }
  return r.max_batch > 0 ? 0 : 1;
}

} // namespace

void add_tune_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* tune = app.add_subcommand("tune", "Find settings that fit");
  tune->require_subcommand(1);
  CLI::App* cmd = tune->add_subcommand(
      "batch",
      "The largest micro-batch whose training step fits in memory (powers of two, then a binary search), and the size to train with");
  // What a training step is: the options of `hotloop train` that change its
  // memory and speed.
  add_run_flags(cmd, f->run, step_option_names());
  cmd->add_option(
      "--margin",
      f->finder.margin,
      "Memory kept free by the recommendation (share of what the process can use)");
  cmd->add_option("--max-batch", f->finder.max_batch, "The search's ceiling");
  cmd->add_option(
      "--trial-steps",
      f->finder.trial_steps,
      "Training steps per size (the first 2 are warm-up)");
  add_json_flag(
      cmd,
      f->json,
      "one JSON object (max_batch, recommended, reason, trials); progress goes to stderr");
  cmd->footer(
      "Examples:\n"
      "  hotloop tune batch --model resnet50 --data synthetic:2048x3x224x224 --precision bf16 --device cuda\n"
      "  hotloop tune batch --model cnn-small --json\n"
      "Exit code: 0 when a size fits, 1 when not even one sample does.");
  cmd->callback([f, cmd, &action] {
    action = [f, cmd] { return run_tune_batch(*f, *cmd); };
  });
}

} // namespace hotloop::cli
