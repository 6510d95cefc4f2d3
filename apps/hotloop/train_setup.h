#pragma once
// What `hotloop train` and `hotloop tune batch` share: opening the data, the
// model's shape from the data, and running the batch-size finder with a line
// per trial and its table.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/train/batch_finder.h"
#include "hotloop/train/options.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::cli {

struct TrainData {
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> val; // null: the data has no val/test
};

// Opens the train split of `spec` and, when `with_val`, the first of its val
// and test splits that exists.
// The --data a command uses: the user's, or for a language model left without
// one the built-in corpus (text:fortunes) instead of Fashion-MNIST.
std::string data_for(
    const std::string& model,
    const std::string& data,
    bool data_given);

TrainData open_train_data(
    const std::string& spec,
    std::uint64_t seed,
    bool with_val);

// Sets the model's input channels, classes and image size from the data
// (where the flags left them at 0), then validates the options.
void fit_model_to_data(
    train::TrainerOptions& o,
    const data::Dataset& train,
    std::int64_t in_channels,
    std::int64_t num_classes);

// A token folder's tokenizer (vocab.json + merges.txt, as `pack
// --tokenizer bpe:` leaves them) copied into RUN/tokenizer/, so that
// `hotloop generate` on the run's checkpoints decodes with it. Nothing for
// other data.
void keep_tokenizer(const std::string& data_spec, const std::string& run_dir);

// Runs the finder on `o`'s model and data path, writing a line per trial to
// `progress`.
train::BatchFinderResult find_batch(
    train::BatchFinderOptions finder,
    const std::shared_ptr<const data::Dataset>& train,
    std::FILE* progress);

// The trials as a table, with the result and the reason.
std::string batch_finder_table(const train::BatchFinderResult& r);

// --batch / --micro-batch as asked (nullopt: auto) through the library's
// resolve_batch on `o`'s model and data path, printing the finder's trials,
// its table and what was decided (rank 0 of a data-parallel job).
train::ResolvedBatch resolve_auto_batch(
    const train::BatchRequest& request,
    const train::TrainerOptions& o,
    const std::shared_ptr<const data::Dataset>& train,
    parallel::ProcessGroup* group);

} // namespace hotloop::cli
