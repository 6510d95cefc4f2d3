#include "hotloop/train/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ctime>

#include "hotloop/errors.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/option_table.h"

namespace hotloop::train {

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw UsageError(fmt::format("{}: {}", key, why));
}

} // namespace

LossScaling parse_loss_scaling(const std::string& text) {
  return parse_named<LossScaling>(kLossScalingNames, text, "loss-scaling");
}

const char* to_string(LossScaling mode) {
  return name_of<LossScaling>(kLossScalingNames, mode);
}

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return std::string("runs/") + stamp;
}

bool scales_loss(LossScaling mode, Precision p) {
  return mode == LossScaling::On ||
      (mode == LossScaling::Auto && p == Precision::Fp16);
}

void TrainerOptions::validate() const {
  // Each option's own range (option_table.cpp), then the rules between them.
  for (const TrainerOption& option : trainer_options()) {
    if (const std::string why = option.check(*this); !why.empty()) {
      bad(option.name, fmt::format("{} {}", option.text(*this), why));
    }
  }
  if (epochs < 1 && steps < 1) {
    bad("epochs", "give --epochs or --steps of at least 1");
  }
  if (!lora_init.empty() && !model.lora.enabled()) {
    bad("lora-init", "starts LoRA adapters: give --lora-rank too");
  }
  if (model.lora.enabled() && model.lora.dropout > 0 &&
      activation_checkpointing != model::Checkpointing::None) {
    // A recomputed block would draw another dropout mask than the forward.
    bad("lora-dropout",
        "dropout with --activation-checkpointing: the recomputed blocks would draw other masks; use --lora-dropout 0");
  }
  if (model.lora.enabled() && (freeze_backbone || !freeze_patterns.empty())) {
    bad("freeze", "LoRA freezes the whole base already: drop --freeze");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    bad("world-size",
        fmt::format("rank {} of {} is not a valid rank", rank, world_size));
  }
  const std::int64_t micro = resolved_micro_batch();
  if (micro < 1 || batch % (micro * world_size) != 0) {
    throw UsageError(
        fmt::format(
            "batch: {} is not divisible by micro-batch {} x {} rank(s)",
            batch,
            micro,
            world_size),
        "choose --batch as a multiple of --micro-batch times the number of ranks");
  }
  if (schedule.kind == ScheduleKind::Step && schedule.step_size < 1) {
    bad("step-size", "the step schedule needs --step-size of at least 1");
  }
  if (optimizer.nesterov &&
      (optimizer.kind != OptimizerKind::Sgd || optimizer.momentum == 0)) {
    bad("nesterov", "needs --optimizer sgd with a momentum above 0");
  }
  if (freeze_backbone && init.empty() &&
      !model::model_kind(model.name).exported()) {
    throw UsageError(
        "freeze: --freeze backbone without --init would train a random backbone's head only",
        "give --init FILE with the pretrained weights");
  }
  if (out_dir.empty() && !resume.empty()) {
    bad("resume",
        "a run without a run directory (--out) has nothing to resume");
  }
  if (cuda_graphs == CudaGraphs::On && device == "cpu") {
    throw UsageError(
        "cuda-graphs: --cuda-graphs on needs a CUDA device, and --device is cpu",
        "use --device cuda, or --cuda-graphs auto (eager where graphs cannot run)");
  }
  // model: not validated here; a C++ user's own model has its own name.
}

namespace {

nlohmann::json model_json(const model::ModelOptions& model) {
  const model::ModelKind kind = model::model_kind(model.name);
  if (kind.language_model()) {
    nlohmann::json j = {
        {"name", model.name},
        {"layers", model.lm.layers},
        {"heads", model.lm.heads},
        {"width", model.lm.width},
        {"context", model.lm.context},
        {"vocab", model.lm.vocab}};
    if (model.lora.enabled()) {
      j["lora"] = {
          {"rank", model.lora.rank},
          {"alpha", model.lora.alpha},
          {"dropout", model.lora.dropout},
          {"targets", model.lora.targets}};
    }
    return j;
  }
  if (kind.exported() && model.lm.context > 0) {
    return {
        {"name", model.name},
        {"head", model.exported.head},
        {"context", model.lm.context},
        {"vocab", model.lm.vocab}};
  }
  nlohmann::json j = {
      {"name", model.name},
      {"num_classes", model.image.num_classes},
      {"in_channels", model.image.in_channels},
      {"image_size", model.image.size},
      {"zero_init_residual", model.image.zero_init_residual}};
  if (kind.exported()) {
    j["head"] = model.exported.head;
  }
  return j;
}

} // namespace

std::int64_t TrainerOptions::resolved_micro_batch() const {
  return micro_batch == 0 ? batch / world_size : micro_batch;
}

nlohmann::json TrainerOptions::options_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainerOption& option : trainer_options()) {
    j[option.name] = option.get(*this);
  }
  return j;
}

nlohmann::json TrainerOptions::to_json() const {
  const std::int64_t micro = resolved_micro_batch();
  return {
      {"options", options_json()},
      {"model", model_json(model)},
      {"world_size", world_size},
      {"micro_batch", micro},
      {"accum_steps", batch / (micro * world_size)}};
}

} // namespace hotloop::train
