#pragma once
// The trainer's parts, as its set-up (trainer_setup.cpp) builds them and its
// loop (trainer.cpp) runs them. One object per idea; RunState is what they
// share.

#include <memory>
#include <string>
#include <vector>

#include <atomic>
#include <optional>

#include "hotloop/model/shard_units.h"
#include "hotloop/parallel/gradient_buckets.h"
#include "hotloop/train/checkpointer.h"
#include "hotloop/train/evaluation.h"
#include "hotloop/train/events.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/gradients.h"
#include "hotloop/train/oom_recovery.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/readback.h"
#include "hotloop/train/step.h"
#include "hotloop/train/step_sync.h"
#include "hotloop/train/step_times.h"
#include "hotloop/train/trainer.h"

namespace hotloop::parallel {
class ShardedReducer;
}

namespace hotloop::train {

struct Trainer::Impl {
  Impl(
      std::shared_ptr<model::Model> model,
      std::shared_ptr<const data::Dataset> train,
      std::shared_ptr<const data::Dataset> val,
      TrainerOptions options,
      TrainerContext context);

  TrainerOptions options; // resolved: rank and world size from the group
  std::shared_ptr<model::Model> model;
  std::shared_ptr<const data::Dataset> train_data;
  std::shared_ptr<const data::Dataset> val_data;
  std::shared_ptr<parallel::ProcessGroup> group;
  RunRecord record; // config.json's run options and sources
  Events events;
  FaultInjection faults;
  RunState state;

  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<PrecisionMode> precision;
  std::unique_ptr<StepSync> sync; // data parallel
  // --shard: the reducer inside sync, and the optimizer's groups as they
  // would be whole (the checkpoints' layout).
  parallel::ShardedReducer* sharded = nullptr;
  std::vector<ParamGroup> whole_groups;
  // --shard 3 with units: the hooks in the model's forward (unit_gather.h).
  std::unique_ptr<model::UnitHooks> unit_gather;
  // Stage 3: training ended with the model sharded (whole_after_training).
  bool sharded_after_fit = false;
  std::unique_ptr<data::EpochLoader> loader;
  std::size_t bad_samples_before = 0; // in loaders OOM recovery replaced
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<OomRecovery> recovery;
  std::unique_ptr<Checkpointer> checkpointer;
  NamedParams params; // trainable, by name
  std::vector<at::Tensor> tensors; // the same, for the loss scaler
  std::unique_ptr<Readback> readback;

  // What one fit() carries from its start to its summary.
  std::unique_ptr<Step> step;
  StepTimes times;
  nlohmann::json before = nlohmann::json::object(); // a resumed run's past
  nlohmann::json last_eval; // {step, result}: for checkpoints
  std::optional<EvalResult> final_eval;

  // The device, threads, model, optimizer, data-parallel start and loader
  // (trainer_setup.cpp).
  void set_up();
  // set_up()'s stages, in its order.
  void bind_state();
  void configure_device();
  void check_data();
  void cap_device_memory();
  void load_weights();
  void measure_flops();
  void place_model();
  void start_from_rank_zero();
  void store_frozen_base();
  void make_optimizer();
  void shard_optimizer(
      std::vector<ParamGroup> whole,
      const parallel::BucketOptions& buckets);
  void size_run();
  void make_loop_parts();
  // The training loader for state.micro_batch; the old one (its threads and
  // buffers) goes first.
  void make_loader();
  void log(const std::string& line) {
    events.message(state, line);
  }

  // The verbs of the loop (trainer_lifecycle.cpp).
  // config.json, the run's first lines, the resume, on_fit_start, the step.
  void begin(const std::atomic<bool>* stop);
  // Step state.step + 1 ran out of memory: the same samples again in smaller
  // micro-batches (throws OutOfMemoryError when it cannot).
  void redo_smaller(const std::string& error);
  // Saves a checkpoint where this process writes them; returns its path.
  // Sharded (every rank calls it): each rank writes its shard file.
  std::string checkpoint();
  // Stage 3, a collective: how a resume loads whole weights (a checkpoint
  // of another stage), the blocks' one at a time (each gathered, written
  // and its shard taken from it).
  Checkpointer::ModelLoader load_by_unit();
  // A step failed: the last good state checkpointed, then an Error.
  [[noreturn]] void fail(const StepFailure& f);
  EvalResult evaluate();
  // Bytes of parameters, gradients and optimizer state this rank holds.
  nlohmann::json model_state_bytes() const;
  // After the last step (or a stop): the final evaluation a resumed run
  // still owes, on_fit_end, summary.json.
  TrainSummary finish(double wall_s, bool stopped_early);
  // Stage 3 (a collective): the model whole on every rank after training
  // where every rank can hold it (true; always without stage 3), else it
  // stays sharded and says so.
  bool whole_after_training();
  // model.safetensors (and a LoRA run's adapter folder) on rank 0; not
  // `whole` (stage 3, a collective), from the blocks read one at a time
  // to rank 0's host memory.
  void write_final_weights(TrainSummary& sum, bool whole);
  // Stage 3, a collective: the model's state with each unit's parameters
  // gathered in turn and copied to the host on rank 0 (the others' copies
  // are skipped).
  model::StateDict model_state_on_host();
};

} // namespace hotloop::train
