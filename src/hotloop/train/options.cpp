#include "hotloop/train/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ctime>

#include "hotloop/errors.h"
#include "hotloop/model/exported.h"
#include "hotloop/model/gpt.h"

namespace hotloop::train {

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw UsageError(fmt::format("{}: {}", key, why));
}

} // namespace

LossScaling parse_loss_scaling(const std::string& text) {
  if (text == "auto") {
    return LossScaling::Auto;
  }
  if (text == "on") {
    return LossScaling::On;
  }
  if (text == "off") {
    return LossScaling::Off;
  }
  throw UsageError(
      fmt::format("loss-scaling '{}': expected auto, on or off", text));
}

const char* to_string(LossScaling mode) {
  switch (mode) {
    case LossScaling::Auto:
      return "auto";
    case LossScaling::On:
      return "on";
    case LossScaling::Off:
      return "off";
  }
  return "?";
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
  if (epochs < 1 && steps < 1) {
    bad("epochs", "give --epochs or --steps of at least 1");
  }
  if (steps < 0) {
    bad("steps", fmt::format("{} is negative", steps));
  }
  if (batch < 1) {
    bad("batch", fmt::format("{} must be at least 1", batch));
  }
  if (micro_batch < 0) {
    bad("micro-batch", fmt::format("{} is negative", micro_batch));
  }
  if (!(bucket_mb > 0)) {
    bad("bucket-mb", fmt::format("{} must be positive", bucket_mb));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    bad("world-size",
        fmt::format("rank {} of {} is not a valid rank", rank, world_size));
  }
  const std::int64_t micro =
      micro_batch == 0 ? batch / world_size : micro_batch;
  if (micro < 1 || batch % (micro * world_size) != 0) {
    throw UsageError(
        fmt::format(
            "batch: {} is not divisible by micro-batch {} x {} rank(s)",
            batch,
            micro,
            world_size),
        "choose --batch as a multiple of --micro-batch times the number of ranks");
  }
  if (schedule.lr <= 0) {
    bad("lr", fmt::format("{} must be positive", schedule.lr));
  }
  if (schedule.warmup_steps < 0) {
    bad("warmup-steps", "is negative");
  }
  if (schedule.kind == ScheduleKind::Step && schedule.step_size < 1) {
    bad("step-size", "the step schedule needs --step-size of at least 1");
  }
  if (schedule.pct_start <= 0 || schedule.pct_start >= 1) {
    bad("pct-start", fmt::format("{} must be in (0, 1)", schedule.pct_start));
  }
  if (optimizer.momentum < 0 || optimizer.momentum >= 1) {
    bad("momentum", fmt::format("{} must be in [0, 1)", optimizer.momentum));
  }
  if (optimizer.nesterov &&
      (optimizer.kind != OptimizerKind::Sgd || optimizer.momentum == 0)) {
    bad("nesterov", "needs --optimizer sgd with a momentum above 0");
  }
  if (optimizer.weight_decay < 0) {
    bad("weight-decay", "is negative");
  }
  if (clip_grad_norm < 0) {
    bad("clip-grad-norm", "is negative (0 turns clipping off)");
  }
  if (label_smoothing < 0 || label_smoothing >= 1) {
    bad("label-smoothing",
        fmt::format("{} must be in [0, 1)", label_smoothing));
  }
  if (eval_every < 0 || checkpoint_every < 0) {
    bad(eval_every < 0 ? "eval-every" : "checkpoint-every", "is negative");
  }
  if (keep_checkpoints < 0) {
    bad("keep-checkpoints", "is negative (0: write none)");
  }
  if (threads < 0) {
    bad("threads", "is negative (0: the usable cores)");
  }
  if (device != "auto" && device != "cpu" && !device.starts_with("cuda")) {
    bad("device",
        fmt::format("'{}': expected auto, cpu, cuda or cuda:N", device));
  }
  if (freeze_backbone && init.empty() && !model::is_exported(model.name)) {
    throw UsageError(
        "freeze: --freeze backbone without --init would train a random backbone's head only",
        "give --init FILE with the pretrained weights");
  }
  if (memory_fraction < 0 || memory_fraction > 1) {
    bad("memory-fraction",
        fmt::format("{} must be in (0, 1] (0: no cap)", memory_fraction));
  }
  if (out_dir.empty() && !resume.empty()) {
    bad("resume",
        "a run without a run directory (--out) has nothing to resume");
  }
  if (readback_every < 0) {
    bad("readback-every", "is negative (0: 1 on the CPU, 16 on CUDA)");
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
  if (model::is_gpt(model.name)) {
    return {
        {"name", model.name},
        {"layers", model.layers},
        {"heads", model.heads},
        {"width", model.width},
        {"context", model.context},
        {"vocab", model.vocab}};
  }
  if (model::is_exported(model.name) && model.context > 0) {
    return {
        {"name", model.name},
        {"head", model.head},
        {"context", model.context},
        {"vocab", model.vocab}};
  }
  nlohmann::json j = {
      {"name", model.name},
      {"num_classes", model.num_classes},
      {"in_channels", model.in_channels},
      {"image_size", model.image_size},
      {"zero_init_residual", model.zero_init_residual}};
  if (model::is_exported(model.name)) {
    j["head"] = model.head;
  }
  return j;
}

} // namespace

nlohmann::json TrainerOptions::to_json() const {
  return {
      {"model", model_json(model)},
      {"epochs", epochs},
      {"steps", steps},
      {"batch", batch},
      {"micro_batch", micro_batch == 0 ? batch / world_size : micro_batch},
      {"accum_steps",
       batch /
           ((micro_batch == 0 ? batch / world_size : micro_batch) *
            world_size)},
      {"world_size", world_size},
      {"sync_batchnorm", sync_batchnorm},
      {"overlap_allreduce", overlap_allreduce},
      {"bucket_mb", bucket_mb},
      {"precision", to_string(precision)},
      {"loss_scaling", to_string(loss_scaling)},
      {"device", device},
      {"threads", threads},
      {"seed", seed},
      {"optimizer",
       {{"kind", to_string(optimizer.kind)},
        {"momentum", optimizer.momentum},
        {"nesterov", optimizer.nesterov},
        {"betas", {optimizer.beta1, optimizer.beta2}},
        {"eps", optimizer.eps},
        {"weight_decay", optimizer.weight_decay}}},
      {"schedule",
       {{"kind", to_string(schedule.kind)},
        {"lr", schedule.lr},
        {"warmup_steps", schedule.warmup_steps},
        {"min_lr", schedule.min_lr},
        {"step_size", schedule.step_size},
        {"gamma", schedule.gamma},
        {"pct_start", schedule.pct_start}}},
      {"head_lr", head_lr < 0 ? schedule.lr : head_lr},
      {"clip_grad_norm", clip_grad_norm},
      {"label_smoothing", label_smoothing},
      {"channels_last", channels_last},
      {"oom_recovery", oom_recovery},
      {"memory_fraction", memory_fraction},
      {"activation_checkpointing", model::to_string(activation_checkpointing)},
      {"cpu_conv", model::to_string(cpu_conv)},
      {"cuda_graphs", to_string(cuda_graphs)},
      {"readback_every", readback_every},
      {"init", init},
      {"init_strict", init_strict},
      {"freeze",
       freeze_backbone ? std::string("backbone")
           : freeze_patterns.empty()
           ? std::string("none")
           : fmt::format("{}", fmt::join(freeze_patterns, ","))},
      {"eval_every", eval_every},
      {"out", out_dir},
      {"checkpoint_every", checkpoint_every},
      {"keep_checkpoints", keep_checkpoints},
      {"resume", resume},
      {"loader",
       {{"workers", loader.workers},
        {"prefetch_batches", loader.prefetch_batches},
        {"augment",
         loader.augment == data::Augment::Default ? "default" : "none"},
        {"size", loader.size},
        {"on_bad_sample",
         loader.on_bad_sample == data::BadSamplePolicy::Skip ? "skip" : "fail"},
        {"resident",
         loader.resident == data::Resident::Auto
             ? "auto"
             : (loader.resident == data::Resident::On ? "on" : "off")}}}};
}

} // namespace hotloop::train
