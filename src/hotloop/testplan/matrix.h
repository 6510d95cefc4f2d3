#pragma once
// `hotloop bench`: the source documents' test plan as a matrix of short
// training runs with the same data, model, seed and steps, so that rows
// compare like with like. The default matrix is device {cpu, cuda} x
// precision {fp32, mixed} x batch {32, 64}, then, on the GPU, doubling
// batches until the first out-of-memory (recorded as its own row, like the
// documents' "batch 96: out of memory"). CPU rows may be cut by a time
// budget; each row says how many steps it ran.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::testplan {

struct BenchRow {
  std::string device = "cpu"; // cpu | cuda
  std::string precision = "fp32"; // fp32 | tf32 | bf16 | fp16 | mixed
  std::int64_t batch = 32;
  std::string model = "resnet18-small";
  std::string data = "fashion-mnist";
  bool grown = false; // added by the GPU batch growth
  // "cuda-mixed-b64": unique within a matrix.
  std::string id() const;
};

struct MatrixOptions {
  std::vector<BenchRow> rows;
  std::int64_t steps = 200;
  double cpu_row_seconds = 0; // a CPU row stops after this (0: no budget)
  bool grow_gpu_batch = true; // after the rows: doubling GPU batches to OOM
  int max_grown_rows = 8; // per (model, precision): a cap on the growth
  std::int64_t eval_samples = 2000; // evenly spaced from the val/test split
  std::uint64_t seed = 0;
  int threads = 0; // CPU threads (0: the usable cores)
  int workers = 0; // decode threads (0: the trainer's default)
  std::string out_dir; // each row's run directory goes to out_dir/rows/<id>
  bool gpu_available = false; // false: GPU rows are "skipped: no GPU"
};

// The `hotloop train` flags a row trains with, as (name, value) in order:
// the row's model, data, batch, precision ("mixed" made concrete) and
// device; the matrix's steps, seed, threads and workers; the row's run
// directory; and what every row leaves out: checkpoints, the final weights,
// OOM recovery (an out-of-memory is the row's answer), TensorBoard and
// progress lines, with telemetry sampled twice a second. resolve_run turns
// them into the row's options as it does for `hotloop train` with them.
std::vector<std::pair<std::string, std::string>> row_train_flags(
    const BenchRow& row,
    const MatrixOptions& options);

struct RowResult {
  BenchRow row;
  std::string status = "ok"; // ok | oom | skipped | failed
  std::string reason; // for oom, skipped, failed
  std::string resolved_precision; // "mixed" made concrete (bf16 or fp16)
  std::int64_t steps = 0; // actually run
  bool cut_by_budget = false;
  double mean_step_ms = 0; // steady state (the first steps left out)
  double median_step_ms = 0;
  double images_per_s = 0; // the trainer's: median over steady steps
  double tokens_per_s = 0; // language-model rows: images_per_s x context
  double model_flops_per_s = 0; // training FLOPs per sample x images_per_s
  std::optional<double> mfu; // over the GPU's dense peak (GPUs in the table)
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_rss_bytes = 0;
  double val_accuracy = 0;
  double val_loss = 0;
  double train_loss = 0;
  double wall_s = 0;
  // GPU 0 over the row (NVML): {util_min, util_max, temp_min, temp_max,
  // power_mean_w, throttle_samples, samples}; null without NVML.
  nlohmann::json gpu;
  nlohmann::json phases_ms; // mean per phase over steady steps
  std::vector<double> losses; // per step, for the loss curves
  nlohmann::json gpu_series; // [{t, util, temp, mem_gib}], for the charts
  std::string run_dir;
};

// The default matrix for `model` on `data` (the README's main job:
// resnet18-small on Fashion-MNIST).
std::vector<BenchRow> default_matrix(
    const std::string& model,
    const std::string& data);

// Runs the rows in order, then the GPU growth. `progress` gets each row as it
// ends; `stop` (may be null) ends the matrix early (rows not run are left
// out). Never throws for a row that fails: the row says why.
std::vector<RowResult> run_matrix(
    const MatrixOptions& options,
    const std::function<void(const RowResult&)>& progress = nullptr,
    const std::atomic<bool>* stop = nullptr);

nlohmann::json to_json(const RowResult& r, bool with_series);
RowResult row_from_json(const nlohmann::json& j);
BenchRow bench_row_from_json(const nlohmann::json& j);

// "cpu fp32 b32: 412 img/s, 77.6 ms/step (median), 84.1% val" or the reason.
std::string to_line(const RowResult& r);

} // namespace hotloop::testplan
