#include "hotloop/train/model_for_data.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"
#include "hotloop/model/lm/language_model.h"

namespace hotloop::train {

void check_model_takes(
    const std::string& model_name,
    bool language_model,
    const data::Dataset& data) {
  const bool tokens = dynamic_cast<const data::TokenDataset*>(&data) != nullptr;
  if (tokens && !language_model) {
    throw UsageError(
        fmt::format(
            "--model {} classifies images, but {} is token data",
            model_name,
            data.describe()),
        fmt::format(
            "train a language model on it: --model {}",
            fmt::join(model::language_model_names(), ", --model ")));
  }
  if (!tokens && language_model) {
    throw UsageError(
        fmt::format(
            "--model {} is a language model, but {} is not token data",
            model_name,
            data.describe()),
        "give it tokens:FILE|DIR|GLOB or text:fortunes|FILE|DIR");
  }
}

void fit_model_to_data(
    TrainerOptions& o,
    const model::ModelKind& kind,
    const data::Dataset& train,
    const DataFit& fit) {
  const bool lm = kind.language_model();
  const auto* tokens = dynamic_cast<const data::TokenDataset*>(&train);
  if (tokens) {
    // A token model has no image input or classes: those left at 0 ("the
    // data's") keep the model options' defaults, unused.
    const model::ImageModelOptions unused;
    o.model.image.in_channels =
        fit.in_channels > 0 ? fit.in_channels : unused.in_channels;
    o.model.image.num_classes =
        fit.num_classes > 0 ? fit.num_classes : unused.num_classes;
  }
  if (kind.exported()) {
    // An exported model is a token model when its data is tokens.
    if (tokens) {
      if (o.model.lm.context <= 0) {
        throw UsageError(
            fmt::format(
                "--model {} on token data needs --context: the sequence length the model takes",
                o.model.name),
            "pass --context N (its position table's size or less)");
      }
      o.model.lm.vocab = tokens->max_token() + 1; // ids the model must take
      return;
    }
    o.model.lm.context = 0;
  } else {
    check_model_takes(o.model.name, lm, train);
  }
  if (lm) {
    // A named size takes the data's vocabulary when it is larger; a
    // folder's is its own.
    if (o.model.lm.vocab == 0 && !kind.hf_folder()) {
      o.model.lm.vocab = std::max(
          model::resolve_language_model(o.model, kind).lm.vocab,
          tokens->vocabulary_hint());
    }
    o.model = model::resolve_language_model(o.model, kind);
    return;
  }
  const auto shape = train.shape();
  o.model.image.in_channels =
      fit.in_channels > 0 ? fit.in_channels : (shape ? shape->channels : 3);
  o.model.image.num_classes = fit.num_classes > 0
      ? fit.num_classes
      : static_cast<std::int64_t>(train.num_classes());
  o.model.image.size =
      o.loader.size > 0 ? o.loader.size : (shape ? shape->height : 224);
}

} // namespace hotloop::train
