// `hotloop tune batch`: the largest micro-batch whose whole training step fits
// in memory, and the size to train with.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/model/model.h"
#include "hotloop/train/batch_finder.h"
#include "train_setup.h"

namespace hotloop::cli {

namespace {

struct TuneFlags {
  train::BatchFinderOptions finder;
  std::string data = "fashion-mnist";
  std::string precision = "fp32";
  std::string optimizer = "sgd";
  std::string activation_checkpointing = "none";
  std::string resident = "auto";
  std::string augment_device = "cpu";
  std::int64_t num_classes = 0;
  std::int64_t in_channels = 0;
  bool json = false;
};

int run_tune_batch(TuneFlags& f) {
  train::TrainerOptions& o = f.finder.trainer;
  o.precision = train::parse_precision(f.precision);
  o.optimizer.kind = train::parse_optimizer(f.optimizer);
  o.activation_checkpointing =
      model::parse_checkpointing(f.activation_checkpointing);
  o.loader.resident = parse_resident(f.resident);
  o.loader.augment_on_device = parse_augment_device(f.augment_device);
  o.batch = 1;
  const TrainData data = open_train_data(f.data, o.seed, false);
  fit_model_to_data(o, *data.train, f.in_channels, f.num_classes);
  const train::BatchFinderResult r =
      find_batch(f.finder, data.train, f.json ? stderr : stdout);
  if (f.json) {
    fmt::print("{}\n", r.to_json().dump(2));
  } else {
    fmt::print("{}", batch_finder_table(r));
    if (r.recommended > 0) {
      fmt::print(
          "train with: hotloop train --model {} --batch {} ... (or --batch auto)\n",
          o.model.name,
          r.recommended);
    }
  }
  return r.max_batch > 0 ? 0 : 1;
}

} // namespace

void add_tune_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<TuneFlags>();
  train::TrainerOptions& o = f->finder.trainer;
  CLI::App* tune = app.add_subcommand("tune", "Find settings that fit");
  tune->require_subcommand(1);
  CLI::App* cmd = tune->add_subcommand(
      "batch",
      "The largest micro-batch whose training step fits in memory (powers of two, then a binary search), and the size to train with");
  cmd->add_option(
      "--model", o.model.name, "mlp, cnn-small, resnet18|34|50[-small]");
  cmd->add_option(
      "--data",
      f->data,
      "fashion-mnist[:DIR], folder:DIR, wds:DIR|GLOB, synthetic:N[xCxHxW]");
  cmd->add_option(
      "--num-classes", f->num_classes, "Outputs; 0: the data set's");
  cmd->add_option(
      "--in-channels", f->in_channels, "Input channels; 0: the data set's");
  cmd->add_option(
      "--precision", f->precision, "fp32, tf32, bf16 or fp16 (CUDA)");
  cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  cmd->add_option(
      "--size",
      o.loader.size,
      "Input height and width; 0: the data's native size (224 for photos)");
  cmd->add_option(
      "--optimizer", f->optimizer, "sgd or adamw (its state counts)");
  cmd->add_option(
      "--activation-checkpointing",
      f->activation_checkpointing,
      "none, stages, all or blocks");
  cmd->add_option(
      "--channels-last",
      o.channels_last,
      "NHWC memory format for convolutions");
  cmd->add_option(
      "--memory-fraction",
      o.memory_fraction,
      "Cap this process's share of the GPU's memory; 0: no cap");
  cmd->add_option(
      "--margin",
      f->finder.margin,
      "Memory kept free by the recommendation (share of what the process can use)");
  cmd->add_option("--max-batch", f->finder.max_batch, "The search's ceiling");
  cmd->add_option(
      "--trial-steps",
      f->finder.trial_steps,
      "Training steps per size (the first 2 are warm-up)");
  cmd->add_option(
      "--threads", o.threads, "CPU threads for the math; 0: the usable cores");
  cmd->add_option(
      "--workers", o.loader.workers, "Decode threads; 0: the usable cores");
  cmd->add_option("--resident", f->resident, "auto, on or off (as in train)");
  cmd->add_option(
      "--augment-device", f->augment_device, "cpu or gpu (as in train)");
  cmd->add_option(
      "--seed", o.seed, "Seed of each trial's model and data order");
  cmd->add_flag(
      "--json",
      f->json,
      "Print one JSON object (max_batch, recommended, reason, trials); progress goes to stderr");
  cmd->footer(
      "Examples:\n"
      "  hotloop tune batch --model resnet50 --data synthetic:2048x3x224x224 --precision bf16 --device cuda\n"
      "  hotloop tune batch --model cnn-small --json\n"
      "Exit code: 0 when a size fits, 1 when not even one sample does.");
  cmd->callback([f, &action] { action = [f] { return run_tune_batch(*f); }; });
}

} // namespace hotloop::cli
