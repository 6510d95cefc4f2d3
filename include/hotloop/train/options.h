#pragma once
// Everything `hotloop train` (and the Trainer API) can be told, as plain
// structs. The CLI flags and the TOML config only fill these; validate() says
// what does not fit, naming the key.

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
  // Data parallel (world_size > 1): BatchNorm statistics over the global
  // batch (all-reduced in forward and backward); gradient all-reduce started
  // bucket by bucket during backward (false: after backward), in buckets of
  // about bucket_mb MiB.
  bool sync_batchnorm = false;
  bool overlap_allreduce = true;
  double bucket_mb = 25;

  Precision precision = Precision::Fp32;
  LossScaling loss_scaling = LossScaling::Auto;
  std::string device = "auto"; // auto | cpu | cuda[:N]
  int threads = 0; // intra-op threads on the CPU; 0: the usable cores
  std::uint64_t seed = 0;

  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  double head_lr = -1; // the head's learning rate; < 0: the same as lr
  double clip_grad_norm = 0; // 0: off
  double clip_grad_value = 0; // 0: off
  double label_smoothing = 0;
  // NHWC activations and weights for 4-D tensors: faster convolutions on the
  // CPU (oneDNN: resnet18-small trains 1.35x faster, bench/results/
  // train-vs-pytorch-2026-11-30-cpu2.json) and with tensor cores on CUDA.
  bool channels_last = true;
  bool cudnn_benchmark = true;
  // Recompute activations in backward (ResNets): less memory, one more
  // forward of the recomputed parts.
  model::Checkpointing activation_checkpointing = model::Checkpointing::None;
  // The built-in models' convolutions on the CPU (model/cpu_conv.h): auto
  // takes im2col + GEMM for output maps of at most 4x4 pixels, where oneDNN's
  // direct kernels are slow, and oneDNN elsewhere.
  model::CpuConv cpu_conv = model::CpuConv::Auto;
  // Capture forward, backward and the optimizer step as one CUDA graph and
  // replay it every step (static shapes; see train/graph_policy.h for what
  // rules it out). auto: when the run allows it, else eager with the reason
  // logged; on: an error when it cannot; off: eager.
  CudaGraphs cuda_graphs = CudaGraphs::Auto;
  // Steps between reading the losses back to the host. The device keeps each
  // step's loss; every N steps they are copied to pinned memory without a
  // synchronization and read when the copy has landed, so the host never
  // waits for the GPU in the loop. Metrics lines, the progress line and the
  // non-finite check see a step's loss then. 1: every step, before the
  // optimizer (a non-finite loss stops before it is applied); 0: 1 on the CPU
  // (where reading costs nothing), 16 on CUDA.
  std::int64_t readback_every = 0;

  // Fine-tuning.
  std::string init; // weight file to start from
  bool init_strict = true;
  // --lora-init DIR: the LoRA adapters start from a PEFT adapter folder's.
  std::string lora_init;
  bool freeze_backbone = false;
  // --freeze 'features.*,blocks.0.*': parameters whose names match one of
  // these globs are not trained.
  std::vector<std::string> freeze_patterns;

  // Out of memory in a step: halve the micro-batch, double the accumulation
  // and redo the step (the effective batch is unchanged; no sample is skipped
  // or applied twice). false: stop with the memory report.
  bool oom_recovery = true;
  // Caps this process's share of the GPU's memory (shared GPUs); 0: no cap.
  double memory_fraction = 0;

  std::int64_t eval_every = 0; // steps; 0: at the end of each epoch
  // The run directory (config.json, metrics.jsonl, checkpoints, summary.json,
  // telemetry); "": the run writes no files (`hotloop train` defaults to
  // runs/<timestamp>: default_run_dir()).
  std::string out_dir;
  std::int64_t checkpoint_every = 0; // steps; 0: at the end of each epoch
  int keep_checkpoints = 3; // the newest kept; 0: none written
  // RUN/model.safetensors at the end: the final weights under the model's
  // own names (false: bench rows, which keep only their figures).
  bool save_weights = true;
  std::string resume; // "" | "auto" | a checkpoint path

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
