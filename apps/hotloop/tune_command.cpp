// `hotloop tune batch`: the largest micro-batch whose whole training step fits
// in memory, and the size to train with.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/model/model.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/recipe.h"
#include "option_sources.h"
#include "train_setup.h"
#include "training_flags.h"

namespace hotloop::cli {

namespace {

struct TuneFlags {
  train::BatchFinderOptions finder;
  TrainingFlags common;
  bool json = false;
};

int run_tune_batch(TuneFlags& f, const CLI::App& cmd) {
  train::TrainerOptions& o = f.finder.trainer;
  f.common.apply(o);
  // The optimizer the model's recipe trains with (its state takes memory).
  const std::set<std::string> given = given_options(cmd);
  train::apply_recipe(
      train::recipe_for(
          o.model.name,
          64,
          given.contains("optimizer") ? std::optional(o.optimizer.kind)
                                      : std::nullopt),
      o,
      given);
  o.batch = 1;
  const TrainData data = open_train_data(
      data_for(o.model.name, f.common.data, given.contains("data")),
      o.seed,
      false);
  fit_model_to_data(o, *data.train, f.common.in_channels, f.common.num_classes);
  const train::BatchFinderResult r =
      find_batch(f.finder, data.train, f.json ? stderr : stdout);
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
  train::TrainerOptions& o = f->finder.trainer;
  CLI::App* tune = app.add_subcommand("tune", "Find settings that fit");
  tune->require_subcommand(1);
  CLI::App* cmd = tune->add_subcommand(
      "batch",
      "The largest micro-batch whose training step fits in memory (powers of two, then a binary search), and the size to train with");
  add_training_flags(cmd, f->common, o);
  cmd->add_option(
      "--margin",
      f->finder.margin,
      "Memory kept free by the recommendation (share of what the process can use)");
  cmd->add_option("--max-batch", f->finder.max_batch, "The search's ceiling");
  cmd->add_option(
      "--trial-steps",
      f->finder.trial_steps,
      "Training steps per size (the first 2 are warm-up)");
  cmd->add_flag(
      "--json",
      f->json,
      "Print one JSON object (max_batch, recommended, reason, trials); progress goes to stderr");
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
