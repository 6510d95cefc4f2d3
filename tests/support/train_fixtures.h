#pragma once
// What the training tests build their runs from: synthetic data sets (seed
// 7) and a model seeded from the options, so two runs start alike.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  o.model.image.in_channels = 1;
  o.model.image.size = 8;
  o.model.image.num_classes = 10;
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

// The steps a run's metrics.jsonl reports a loss for, in file order: a run
// resumed where it stopped lists each step once (1, 2, ..., N); one that
// started again from step 0 lists the first part's steps twice.
inline std::vector<std::int64_t> steps_with_a_loss(const std::string& run_dir) {
  std::ifstream in(std::filesystem::path(run_dir) / "metrics.jsonl");
  std::vector<std::int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      steps.push_back(j["step"].get<std::int64_t>());
    }
  }
  return steps;
}

// 1, 2, ..., n.
inline std::vector<std::int64_t> steps_one_to(std::int64_t n) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 1; i <= n; ++i) {
    v.push_back(i);
  }
  return v;
}

} // namespace hotloop::test
