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

// An mlp on 1x8x8 images, batch 32, plain SGD at a constant 0.05, one
// thread and one worker, no augmentation: small, fast and deterministic.
inline train::TrainerOptions small_options(const std::string& out) {
  train::TrainerOptions o;
  o.model.name = "mlp";
  o.model.in_channels = 1;
  o.model.image_size = 8;
  o.model.num_classes = 10;
  o.batch = 32;
  o.device = "cpu";
  o.threads = 1;
  o.seed = 5;
  o.out_dir = out;
  o.optimizer.kind = train::OptimizerKind::Sgd;
  o.schedule.kind = train::ScheduleKind::Constant;
  o.schedule.lr = 0.05;
  o.loader.workers = 1;
  o.loader.augment = data::Augment::None;
  o.loader.resident = data::Resident::Off;
  return o;
}

} // namespace hotloop::test
