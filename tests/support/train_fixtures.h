#pragma once
// What the training tests build their runs from: synthetic data sets (seed
// 7) and a model seeded from the options, so two runs start alike.

#include <memory>
#include <string>

#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/model/model.h"
#include "hotloop/train/options.h"

namespace hotloop::test {

inline std::shared_ptr<const data::Dataset> synthetic(
    const std::string& spec,
    data::Split split = data::Split::Train) {
  return data::open_dataset(data::parse_data_spec(spec), split, 7);
}

inline std::shared_ptr<model::Model> make(const train::TrainerOptions& o) {
  torch::manual_seed(o.seed);
  return model::make_model(o.model);
}

} // namespace hotloop::test
