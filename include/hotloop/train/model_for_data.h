#pragma once
// The model's shape from its training data, as `hotloop train`, `tune batch`
// and bench rows settle it: a GPT's vocabulary grows to what the tokens need
// (the size's own when larger), and the named size is written out in full
// (layers, heads, width, context) so config.json and checkpoints name it; an
// image model takes the data's channels, classes and image size.

#include <cstdint>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/options.h"

namespace hotloop::train {

struct DataFit {
  std::int64_t in_channels = 0; // > 0: this, not the data's
  std::int64_t num_classes = 0; // > 0: this, not the data's
};

// UsageError when a language model meets data that is not tokens, or an image
// model token data, with the fix.
void check_model_takes(
    const std::string& model_name,
    bool language_model,
    const data::Dataset& data);

// Checks the model's kind (`kind`: what o.model.name names, model_kind())
// against the data (above), then fills o.model from `train`
// (o.loader.size > 0 sets the image size). Does not validate `o`.
void fit_model_to_data(
    TrainerOptions& o,
    const model::ModelKind& kind,
    const data::Dataset& train,
    const DataFit& fit = {});

} // namespace hotloop::train
