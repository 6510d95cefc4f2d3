#pragma once
// The run folder and telemetry of `hotloop train` for a training loop that
// hotloop does not drive (Python's hotloop.Run): the same callbacks
// (telemetry: step phases, the NVML/host sampler, a diagnosis every window of
// steps; metrics.jsonl; TensorBoard; the console only when asked), the same
// config.json and summary.json, and report.html.
//
// The caller marks each step: begin_step() once its batch is in hand (the
// data phase is the wait the caller reports, a loader's, or else the time
// since the previous step ended), phase() marks inside the step when it
// wants them (the rest counts as forward), end_step() with the samples the
// step took. Losses come when the caller has them (record_loss), so that no
// step waits for the device to read one.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/phase.h"
#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/train/callbacks/standard_callbacks.h"
#include "hotloop/train/options.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

struct LoopRunOptions {
  std::string out_dir; // "": no files
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32; // the math's (tensor-idle, MFU peak)
  // A uniform guess's loss is ln(num_classes): the not-learning verdict
  // compares with it (0: unknown, that check is off).
  std::int64_t num_classes = 0;
  std::int64_t tokens_per_sample = 0; // language models: tokens/s
  double flops_per_sample = 0; // training FLOPs per sample (MFU); 0: unknown
  std::int64_t warmup_steps = 0; // not judged as not learning before
  std::int64_t total_steps = 0; // for progress; 0: unknown
  int rank = 0; // only rank 0 writes files
  int world_size = 1;
  // Console off unless asked (a library prints nothing on its own).
  CallbackOptions callbacks = [] {
    CallbackOptions o;
    o.console.enabled = false;
    return o;
  }();
  nlohmann::json config = nlohmann::json::object(); // into config.json
  // The token data's tokenizer, kept in RUN/tokenizer/ as the trainer keeps
  // it (data::TokenDataset::tokenizer_files; Python: the Loader's).
  std::vector<std::string> tokenizer_files;
};

class LoopRun {
 public:
  // Creates out_dir and writes config.json; starts the sampler. Throws
  // UsageError for options out of range, Error when out_dir cannot be made.
  explicit LoopRun(LoopRunOptions options);
  ~LoopRun(); // finish() when the caller did not
  LoopRun(const LoopRun&) = delete;
  LoopRun& operator=(const LoopRun&) = delete;

  // A step begins: its batch is in hand. `data_wait_s`: how long the caller
  // waited for it (a loader's figure); empty: the time since the previous
  // step ended (0 for the first). Throws UsageError inside a step.
  void begin_step(std::optional<double> data_wait_s = std::nullopt);
  // Phase `p` begins inside the step (forward, backward, optimizer, ...).
  void phase(Phase p);
  // The step ends after taking `samples` samples at learning rate `lr`.
  // `loss_follows`: record_loss() will give this step's loss (metrics.jsonl
  // holds its line until then). Returns the step's number (1-based).
  std::int64_t end_step(
      std::int64_t samples,
      double lr = 0,
      bool loss_follows = false);
  // The loss of step `step` (at or after its end, in step order).
  void record_loss(std::int64_t step, double loss);
  // The latest window's diagnosis (most important finding first); empty
  // before the first window closes.
  std::optional<telemetry::Diagnosis> diagnosis() const;
  std::int64_t steps() const;
  bool in_step() const {
    return in_step_;
  }
  // Ends the run: summary.json and report.html (rank 0 with an out_dir).
  // `bad_samples`: what the caller's loader skipped. A second call returns
  // the first's summary.
  TrainSummary finish(std::size_t bad_samples = 0, bool stopped_early = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool in_step_ = false;
};

} // namespace hotloop::train
