#pragma once
// What `hotloop train` and `hotloop tune batch` share: opening the data,
// resolve_run's context with a line per batch-finder trial, and the
// finder's table.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/options.h"
#include "hotloop/train/resolve_run.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::cli {

// The train split of `spec`; `model_folder`: the model's Hugging Face folder
// (empty: none), whose tokenizer and the loader's chat template
// (--chat-template) encode instruction data; images to the loader's
// --max-image-pixels.
std::shared_ptr<const data::Dataset> open_train_data(
    const std::string& spec,
    std::uint64_t seed,
    const std::string& model_folder = {},
    const data::LoaderOptions& loader = {});

// The split the run evaluates on (data::open_eval_split: val, else test, or
// null), opened as open_train_data opens the train split.
std::shared_ptr<const data::Dataset> open_val_data(
    const std::string& spec,
    std::uint64_t seed,
    const std::string& model_folder,
    const data::LoaderOptions& loader);

// resolve_run's context for a command: the data opened as `spec` says, and
// the batch finder's start and trials printed to `progress` (null: quiet,
// the ranks other than 0).
train::ResolveContext resolve_context(
    const train::RunOptions& run,
    std::shared_ptr<parallel::ProcessGroup> group,
    std::FILE* progress);

// The finder's trials as a table, with the result and the reason.
std::string batch_finder_table(const train::BatchFinderResult& r);

} // namespace hotloop::cli
