#pragma once
// One resolution order for every command that trains (train, tune batch,
// bench rows, smoke): the options as given -> the data (a language model
// left without --data trains on text:fortunes) -> the model's recipe for
// what the user left unset -> the model fitted to the data -> "auto" batches
// from the batch-size finder, agreed by the ranks -> the recipe again (its
// learning rate may follow the batch) -> the run directory -> validated.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/data/dataset.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/recipe.h"
#include "hotloop/train/run_options.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::train {

struct ResolveContext {
  // Opens the train split of a data spec (the caller keeps it: the trainer
  // and the batch finder read it), given the model's Hugging Face folder
  // (empty: none), whose tokenizer encodes instruction data.
  std::function<std::shared_ptr<const data::Dataset>(
      const std::string& spec,
      const std::string& model_folder)>
      open_train;
  // Data parallel: the ranks agree (a sharded run's batch trials train
  // sharded over it).
  std::shared_ptr<parallel::ProcessGroup> group;
  // The finder's settings for "auto" (its trainer options are the run's).
  BatchFinderOptions finder;
  std::function<void(const BatchFinderOptions&)> on_finder_start;
  TrialCallback on_trial;
  // The mixed precision of the CUDA device a --device means (nullopt: the
  // CPU), for the recipe; the tests stand in a GPU's answer.
  std::function<std::optional<Precision>(const std::string& device)>
      gpu_precision = gpu_mixed_precision;
};

struct ResolvedRun {
  // What --model names (asked once, after --init may have named the
  // folder): the rest of the run takes this, not the name's text.
  model::ModelKind model;
  std::shared_ptr<const data::Dataset> train;
  Recipe recipe; // the model's, at the resolved batch
  std::optional<BatchFinderResult> found; // when the finder ran
  std::vector<std::string> notes; // what "auto" decided, for the log
};

// Resolves `run` in place (run.trainer is then ready for the Trainer, and
// run.sources names the options the recipe set). Throws UsageError for
// options that do not fit (naming the option), DataError for data that does
// not open or does not fit the model, OutOfMemoryError when "auto" finds no
// batch that fits.
ResolvedRun resolve_run(RunOptions& run, const ResolveContext& context);

} // namespace hotloop::train
