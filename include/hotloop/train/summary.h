#pragma once
// What a training run reports: the evaluation's result and the run's summary
// (summary.json), and the one rule that says which steps are its steady state.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::train {

struct EvalResult {
  double loss = 0; // per sample (language models: per token)
  double accuracy = 0; // language models: next tokens predicted (top-1)
  std::int64_t samples = 0; // language models: tokens
  // Language models: exp(loss), and on byte-level data bits per byte
  // (loss / ln 2); empty otherwise.
  std::optional<double> perplexity;
  std::optional<double> bits_per_byte;
  std::vector<double> per_class_accuracy;
  std::vector<std::vector<std::int64_t>> confusion; // [true][predicted]
  nlohmann::json to_json() const;
  static EvalResult from_json(const nlohmann::json& j);
};

struct TrainSummary {
  std::int64_t steps = 0;
  double epochs = 0; // steps / steps per epoch
  double train_loss = 0; // mean over the last 50 steps
  std::optional<EvalResult> eval; // the final evaluation
  // Samples/s over the steady-state steps: on a GPU, their samples over the
  // GPU time they took (CUDA events on the training stream); on the CPU,
  // the median of the steps' rates (host wall clock). step_clock says which.
  double images_per_s = 0;
  // Language models: images_per_s x tokens per sample; 0 otherwise.
  double tokens_per_s = 0;
  // Model FLOPs per second over the steady state (training FLOPs per sample
  // x samples/s; 0 when the model does not say its FLOPs), and its share of
  // the GPU's dense peak for the run's precision (MFU; empty on the CPU or
  // on a GPU hotloop has no peak for).
  double model_flops_per_s = 0;
  std::optional<double> mfu;
  std::string mfu_peak_source; // the peak's figure and where it is from
  double step_time_ms_median = 0;
  double step_time_ms_p90 = 0;
  std::string step_clock = "host"; // "cuda-events" | "host"
  double data_wait_fraction = 0;
  std::uint64_t peak_allocated_bytes = 0; // CUDA
  std::uint64_t peak_reserved_bytes = 0; // CUDA
  std::uint64_t peak_rss_bytes = 0; // the process, any device
  // What this rank holds of the model's training state after a step, in
  // bytes by kind (parameters, gradients, optimizer state), and the ZeRO
  // stage that decided it (0: whole on every rank).
  nlohmann::json model_state_bytes = nlohmann::json::object();
  int shard = 0;
  std::int64_t skipped_steps = 0;
  std::size_t bad_samples = 0;
  std::int64_t micro_batch = 0; // as the run ended (OOM recovery shrinks it)
  std::int64_t accum_steps = 0; // as the run ended
  std::int64_t oom_recoveries = 0; // steps redone with a smaller micro-batch
  std::string device;
  std::string precision;
  // CUDA graphs: steps replayed from the captured graph, and why the run
  // was (or went) eager; empty when every step after the warm-up replayed.
  std::int64_t graph_replays = 0;
  std::string graph_off_reason;
  bool graph_capture_out_of_memory = false; // the capture did not fit

  double wall_s = 0;
  bool stopped_early = false; // SIGINT/SIGTERM: checkpoint written, resumable
  std::string last_checkpoint;
  // RUN/model.safetensors: the final weights under the model's own names
  // (Python's model.load_state_dict reads them); empty without a run dir.
  std::string weights;
  // A resumed run: the checkpoint's step, and the figures above that come
  // from the part of the run before the interruption (a run resumed after its
  // last step has no steps of its own to time: its rates are the earlier
  // part's). -1 and empty for a run that started fresh.
  std::int64_t resumed_at = -1;
  std::vector<std::string> from_before_resume;
  // What callbacks added at the run's end, by callback name ("telemetry": the
  // sampler's cost, the last diagnosis and the verdicts seen).
  nlohmann::json callbacks = nlohmann::json::object();
  nlohmann::json to_json() const;
};

// The steady state of a run of `steps` timed steps starts at this index: the
// first tenth and 2 more are warm-up (the allocator, cuDNN's autotuner, the
// loader filling its queue), but at least 3 steps are kept when there are.
std::size_t steady_state_start(std::size_t steps);

// The p-quantile (0..1) of `values`, linearly interpolated; 0 when empty.
double percentile(std::vector<double> values, double p);

} // namespace hotloop::train
