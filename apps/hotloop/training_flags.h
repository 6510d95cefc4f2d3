#pragma once
// The flags `hotloop train` and `hotloop tune batch` share (what a training
// step is: model, data, precision, device, optimizer, memory layout, loader),
// declared once. Text values are parsed into the options by apply().

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "hotloop/train/options.h"

namespace hotloop::cli {

struct TrainingFlags {
  std::string data = "fashion-mnist";
  std::string precision = "fp32";
  std::string optimizer = "sgd";
  std::string activation_checkpointing = "none";
  std::string resident = "auto";
  std::string augment_device = "cpu";
  std::int64_t num_classes = 0;
  std::int64_t in_channels = 0;

  // Parses the text values into `o` (UsageError naming a bad one).
  void apply(train::TrainerOptions& o) const;
};

// Adds --model --data --layers --heads --width --context --vocab --num-classes
// --in-channels --precision --device --size
// --optimizer --activation-checkpointing --channels-last --memory-fraction
// --threads --workers --resident --augment-device --seed to `cmd`.
void add_training_flags(
    CLI::App* cmd,
    TrainingFlags& f,
    train::TrainerOptions& o);

} // namespace hotloop::cli
