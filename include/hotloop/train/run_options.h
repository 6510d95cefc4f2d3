#pragma once
// Everything a training run is told, as `hotloop train` takes it: the
// trainer's options (train/option_table.h) and what the command adds around
// them (the data, "auto" batches, evaluation, the callbacks' settings, the
// data-parallel job). Its table is the trainer's plus those entries; the
// commands register their flags from it, --config reads its keys, and
// --print-config writes it back as TOML. resolve_run (train/resolve_run.h)
// turns it into TrainerOptions.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hotloop/parallel/job.h"
#include "hotloop/train/callbacks/standard_callbacks.h"
#include "hotloop/train/option_table.h"
#include "hotloop/train/options.h"
#include "hotloop/train/trainer.h"

namespace hotloop::train {

// Where an option's value came from.
inline constexpr const char* kFromFlag = "flag";
inline constexpr const char* kFromConfigFile = "config file";
inline constexpr const char* kFromRecipe = "recipe";
inline constexpr const char* kFromDefault = "default";

struct RunOptions {
  // The model's classes and input channels start at 0: the data's.
  RunOptions();

  TrainerOptions trainer;
  // fashion-mnist[:DIR], folder:DIR, wds:..., synthetic:..., tokens:...,
  // text:... (data/data_spec.h); a language model left at the default
  // trains on text:fortunes.
  std::string data = "fashion-mnist";
  // --batch auto / --micro-batch auto: the batch-size finder decides
  // (resolve_run replaces them with numbers).
  bool batch_auto = false;
  bool micro_batch_auto = false;
  bool eval = true; // evaluate on the data's val or test split
  CallbackOptions callbacks;
  parallel::JobOptions job;
  // Where each option's value came from, by name ("flag", "config file",
  // "recipe"); an option not named here has its default.
  std::map<std::string, std::string> sources;

  // Whether the user set `name` (a flag or the config file).
  bool given(std::string_view name) const;
  // The source of `name` ("default" when none is recorded).
  std::string source(std::string_view name) const;
};

using RunOption = Option<RunOptions>;

// Every option of a run, in --help's order: the trainer's (batch and
// micro-batch also take "auto") and the run's own.
const std::vector<RunOption>& run_options();
const RunOption* find_run_option(std::string_view name);

// Sets option `name` from `value` as the flag --name=value would (parsed and
// checked, its source "flag"): how a program that is not the command line
// (bench rows, smoke) states what it asks for. std::logic_error for a name
// the table lacks.
void set_flag(RunOptions& r, std::string_view name, const std::string& value);

// The options as TOML, `name = value  # source` a line, grouped by section:
// what `hotloop train --print-config` prints; `--config` reads it back.
std::string to_toml(const RunOptions& r);

// config.json's record of the run: every option by name, and the sources.
RunRecord record_of(const RunOptions& r);

} // namespace hotloop::train
