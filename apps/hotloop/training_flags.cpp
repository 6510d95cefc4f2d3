#include "training_flags.h"

#include "cli_common.h"
#include "hotloop/model/model.h"

namespace hotloop::cli {

void TrainingFlags::apply(train::TrainerOptions& o) const {
  o.precision = train::parse_precision(precision);
  o.optimizer.kind = train::parse_optimizer(optimizer);
  o.activation_checkpointing =
      model::parse_checkpointing(activation_checkpointing);
  o.loader.resident = parse_resident(resident);
  o.loader.augment_on_device = parse_augment_device(augment_device);
}

void add_training_flags(
    CLI::App* cmd,
    TrainingFlags& f,
    train::TrainerOptions& o) {
  cmd->add_option(
      "--model",
      o.model.name,
      "mlp, cnn-small, resnet18|34|50[-small]; language models: gpt-nano, gpt-mini, gpt2, gpt2-medium; torchscript:FILE (a module exported from Python: docs/bring-your-own-model.md)");
  cmd->add_option(
      "--head",
      o.model.head,
      "torchscript: the classifier head's module name (replaced when the data has another class count; --freeze backbone and --head-lr use it); default: the module owning the last 2-D weight");
  cmd->add_option(
      "--data",
      f.data,
      "fashion-mnist[:DIR], folder:DIR, wds:DIR|GLOB, synthetic:N[xCxHxW]; for language models tokens:FILE|DIR|GLOB or text:fortunes|FILE|DIR (default with --model gpt-*: text:fortunes)");
  cmd->add_option(
      "--layers", o.model.layers, "GPT: transformer blocks; 0: the size's");
  cmd->add_option(
      "--heads", o.model.heads, "GPT: attention heads; 0: the size's");
  cmd->add_option(
      "--width", o.model.width, "GPT: embedding width; 0: the size's");
  cmd->add_option(
      "--context",
      o.model.context,
      "GPT: tokens per sequence (the longest it reads); 0: the size's. torchscript on token data: required");
  cmd->add_option(
      "--vocab",
      o.model.vocab,
      "GPT: vocabulary (padded to a multiple of 64 inside); 0: the size's or the data's, the larger");
  cmd->add_option(
      "--num-classes", f.num_classes, "Outputs; 0: the data set's class count");
  cmd->add_option(
      "--in-channels", f.in_channels, "Input channels; 0: the data set's");
  cmd->add_option(
      "--precision",
      f.precision,
      "fp32, tf32, bf16 (autocast; CPU too) or fp16 (autocast + loss scaling; CUDA)");
  cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  cmd->add_option(
      "--size",
      o.loader.size,
      "Input height and width; 0: the data's native size (224 for photos)");
  cmd->add_option(
      "--optimizer",
      f.optimizer,
      "sgd or adamw (its state counts in memory); a built-in model's recipe picks one");
  cmd->add_option(
      "--activation-checkpointing",
      f.activation_checkpointing,
      "none, stages (recompute each ResNet stage in backward), all (the stem too) or blocks (each residual block on its own)");
  cmd->add_option(
      "--channels-last",
      o.channels_last,
      "NHWC memory format for convolutions (true: faster on the CPU and with tensor cores)");
  cmd->add_option(
      "--memory-fraction",
      o.memory_fraction,
      "Cap this process's share of the GPU's memory (0 < F <= 1); 0: no cap");
  cmd->add_option(
      "--threads", o.threads, "CPU threads for the math; 0: the usable cores");
  cmd->add_option(
      "--workers", o.loader.workers, "Decode threads; 0: the usable cores");
  cmd->add_option(
      "--resident",
      f.resident,
      "auto, on or off: decode the data set once into memory");
  cmd->add_option(
      "--augment-device",
      f.augment_device,
      "cpu (per sample, in the decode threads) or gpu (the whole batch on the GPU; needs --device cuda)");
  cmd->add_option(
      "--shuffle",
      o.loader.shuffle,
      "Shuffle the training samples each epoch (false: the data's own order, as for parity checks)");
  cmd->add_option(
      "--seed", o.seed, "Seed: initialization, shuffle order, augmentation");
}

} // namespace hotloop::cli
