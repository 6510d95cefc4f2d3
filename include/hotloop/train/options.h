#pragma once
// Everything `hotloop train` (and the Trainer API) can be told, as plain
// structs. The CLI flags and the TOML config only fill these; validate() says
// what does not fit, naming the key.
//
// What each option means, its default and its range are written once, in its
// entry in the option table (train/option_table.cpp; `hotloop train --help`,
// TrainerOptions::options_json() and --print-config read it). The comments
// here say only what the table does not: how fields relate, and the design.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/core/named.h"
#include "hotloop/data/loader.h"
#include "hotloop/model/cpu_conv.h"
#include "hotloop/model/model.h"

namespace hotloop::train {

enum class Precision { Fp32, Tf32, Bf16, Fp16 };
enum class OptimizerKind { Sgd, AdamW };
enum class ScheduleKind { Constant, Cosine, Step, OneCycle };
// CUDA graph capture of the whole training step (train/graph_policy.h).
enum class CudaGraphs { Auto, On, Off };
// Dynamic loss scaling (train/loss_scaler.h): auto scales fp16 only; on scales
// any precision (as torch.amp.GradScaler(enabled=True) would: the gradients
// are unscaled before the update, so fp32/bf16 train as without it, with the
// overflow check and skip); off never scales (fp16 gradients may underflow).
enum class LossScaling { Auto, On, Off };

inline constexpr Named<Precision> kPrecisionNames[] = {
    {Precision::Fp32, "fp32"},
    {Precision::Tf32, "tf32"},
    {Precision::Bf16, "bf16"},
    {Precision::Fp16, "fp16"}};
inline constexpr Named<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::Sgd, "sgd"},
    {OptimizerKind::AdamW, "adamw"}};
inline constexpr Named<ScheduleKind> kScheduleNames[] = {
    {ScheduleKind::Constant, "constant"},
    {ScheduleKind::Cosine, "cosine"},
    {ScheduleKind::Step, "step"},
    {ScheduleKind::OneCycle, "onecycle"}};
inline constexpr Named<CudaGraphs> kCudaGraphsNames[] = {
    {CudaGraphs::Auto, "auto"},
    {CudaGraphs::On, "on"},
    {CudaGraphs::Off, "off"}};
inline constexpr Named<LossScaling> kLossScalingNames[] = {
    {LossScaling::Auto, "auto"},
    {LossScaling::On, "on"},
    {LossScaling::Off, "off"}};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::Sgd;
  double momentum = 0.9; // SGD
  bool nesterov = false; // SGD
  double beta1 = 0.9; // AdamW
  double beta2 = 0.999; // AdamW
  double eps = 1e-8; // AdamW
  double weight_decay = 0.0;
};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Cosine;
  double lr = 0.1; // peak (cosine, onecycle) or initial (constant, step)
  std::int64_t warmup_steps = 0; // linear from 0 (cosine, step, constant)
  double min_lr = 0.0; // cosine's floor
  std::int64_t step_size = 0; // step: multiply by gamma every step_size steps
  double gamma = 0.1;
  double pct_start = 0.3; // onecycle: share of steps rising (torch's default)
  double div_factor = 25; // onecycle: start at lr / div_factor
  double final_div_factor = 1e4; // onecycle: end at start / final_div_factor
};

struct TrainerOptions {
  // How long: steps wins when both are set.
  std::int64_t epochs = 1;
  std::int64_t steps = 0;
  // Global batch per optimizer step, and what goes through the model at once
  // (0: the whole batch). Accumulation = batch / (micro_batch * world_size).
  std::int64_t batch = 64;
  std::int64_t micro_batch = 0;
  int world_size = 1;
  int rank = 0;
  // Data parallel (world_size > 1).
  bool sync_batchnorm = false;
  bool overlap_allreduce = true;
  double bucket_mb = 25;
  // ZeRO stage: 0 keeps everything whole on every rank (plain data
  // parallel); 1 shards the optimizer state over the ranks; 2 also
  // reduce-scatters the gradients into each rank's shard; 3 also shards
  // the blocks' parameters.
  int shard = 0;
  // Stages 2-3: gradient buckets being reduce-scattered at once, whole
  // (0: every bucket until the step's end).
  std::int64_t reduces_in_flight = 2;
  // "optimizer": the optimizer's state and update in host memory
  // (ZeRO-Offload); "none": on the training device.
  std::string offload = "none";

  Precision precision = Precision::Fp32;
  LossScaling loss_scaling = LossScaling::Auto;
  std::string device = "auto";
  int threads = 0;
  std::uint64_t seed = 0;

  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  double head_lr = -1;
  double clip_grad_norm = 0;
  double clip_grad_value = 0;
  double label_smoothing = 0;
  // On by default: oneDNN's NHWC convolutions train resnet18-small 1.35x
  // faster on the CPU (bench/results/train-vs-pytorch-2026-11-30-cpu2.json).
  bool channels_last = true;
  bool cudnn_benchmark = true;
  model::Checkpointing activation_checkpointing = model::Checkpointing::None;
  model::CpuConv cpu_conv = model::CpuConv::Auto; // model/cpu_conv.h
  // What rules CUDA graphs out: train/graph_policy.h.
  CudaGraphs cuda_graphs = CudaGraphs::Auto;
  // The device keeps each step's loss; the losses are copied to pinned memory
  // without a synchronization and read when the copy has landed, so the host
  // never waits for the GPU in the loop.
  std::int64_t readback_every = 0;

  // Fine-tuning.
  std::string init;
  bool init_strict = true;
  std::string lora_init;
  bool freeze_backbone = false;
  std::vector<std::string> freeze_patterns;

  // The effective batch is unchanged by a recovery: no sample is skipped or
  // applied twice (train/oom_recovery.h).
  bool oom_recovery = true;
  double memory_fraction = 0;

  std::int64_t eval_every = 0;
  // The run folder (train/run_folder.h); "": the run writes no files (the
  // library's default; `hotloop train`'s is default_run_dir()).
  std::string out_dir;
  std::int64_t checkpoint_every = 0;
  int keep_checkpoints = 3;
  bool save_weights = true; // false: bench rows, which keep only their figures
  std::string resume;

  // The loader (batch_size is set from micro_batch; device from `device`).
  data::LoaderOptions loader;
  // The model as built (recorded in the config and checkpoints).
  model::ModelOptions model;

  // Throws UsageError naming the option for values out of range (each
  // option's check in the option table, train/option_table.h) and options
  // that do not fit together (batch not divisible, fp16 without CUDA, ...).
  void validate() const;
  // Samples per forward/backward: micro_batch, or the rank's share of batch.
  std::int64_t resolved_micro_batch() const;
  // Every option of the table by its name ("lr": 0.1, ...).
  nlohmann::json options_json() const;
  // The resolved configuration as config.json and checkpoints record it:
  // {"options": options_json(), "model": the model as built, "world_size",
  // "micro_batch", "accum_steps"}.
  nlohmann::json to_json() const;
};

Precision parse_precision(const std::string& text);
const char* to_string(Precision p);
OptimizerKind parse_optimizer(const std::string& text);
const char* to_string(OptimizerKind kind);
ScheduleKind parse_schedule(const std::string& text);
const char* to_string(ScheduleKind kind);
CudaGraphs parse_cuda_graphs(const std::string& text);
const char* to_string(CudaGraphs mode);
LossScaling parse_loss_scaling(const std::string& text);
const char* to_string(LossScaling mode);
// Whether a run in precision `p` scales its loss under `mode`.
bool scales_loss(LossScaling mode, Precision p);
// runs/<local time: YYYYmmdd-HHMMSS>, `hotloop train`'s run directory.
std::string default_run_dir();

} // namespace hotloop::train
