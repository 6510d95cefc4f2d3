#pragma once
// The trainer's parts, as its set-up (trainer_setup.cpp) builds them and its
// loop (trainer.cpp) runs them. One object per idea; RunState is what they
// share.

#include <memory>
#include <string>
#include <vector>

#include "hotloop/train/checkpointer.h"
#include "hotloop/train/evaluation.h"
#include "hotloop/train/events.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/gradients.h"
#include "hotloop/train/mixed_precision.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/recovery.h"
#include "hotloop/train/step_sync.h"
#include "hotloop/train/trainer.h"

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
  Events events;
  FaultInjection faults;
  RunState state;

  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<MixedPrecision> precision;
  std::unique_ptr<StepSync> sync; // data parallel
  std::unique_ptr<data::Loader> loader;
  std::size_t bad_samples_before = 0; // in loaders OOM recovery replaced
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<OomRecovery> recovery;
  std::unique_ptr<Checkpointer> checkpointer;
  NamedParams params; // trainable, by name
  std::vector<at::Tensor> tensors; // the same, for the loss scaler

  // The device, threads, model, optimizer, data-parallel start and loader
  // (trainer_setup.cpp).
  void set_up();
  // The training loader for state.micro_batch; the old one (its threads and
  // buffers) goes first.
  void make_loader();
  void log(const std::string& line) {
    events.message(state, line);
  }
};

} // namespace hotloop::train
