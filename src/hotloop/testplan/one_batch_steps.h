#pragma once
// The trainer's own step (train/eager_step.h) on one batch, over and over:
// what smoke's rungs train with, so that the ladder checks the step that
// `hotloop train` runs, not a copy of it.

#include <memory>
#include <optional>

#include <ATen/ops/zeros.h>

#include "hotloop/data/loader.h"
#include "hotloop/model/model.h"
#include "hotloop/train/eager_step.h"
#include "hotloop/train/optimizer.h"

namespace hotloop::testplan {

// One batch, over and over: the ladder's data.
class RepeatBatch final : public data::BatchSource {
 public:
  explicit RepeatBatch(data::Batch b) : batch_(std::move(b)) {}
  std::optional<data::Batch> next() override {
    return batch_;
  }
  double last_wait_seconds() const override {
    return 0;
  }

 private:
  data::Batch batch_;
};

// The trainer's own step (train/eager_step.h) on one batch: every rung that
// trains runs it, with the loss read before each update.
class OneBatchSteps {
 public:
  OneBatchSteps(
      std::shared_ptr<model::Model> m,
      const data::Batch& batch,
      const c10::Device& device,
      train::Precision precision,
      const train::OptimizerOptions& optimizer)
      : batches_(batch),
        precision_(
            train::make_precision(precision, train::LossScaling::Auto, device)),
        readback_(1, false, precision_->skips_overflow()),
        optimizer_({{"all", m->parameters(), 1.0}}, optimizer) {
    options_.precision = precision;
    options_.channels_last = false;
    options_.oom_recovery = false;
    state_.options = &options_;
    state_.device = device;
    state_.model = std::move(m);
    state_.optimizer = &optimizer_;
    state_.batches = &batches_;
    state_.total_steps = 1;
    state_.steps_per_epoch = 1;
    state_.micro_batch = batch.labels.size(0);
    train::StepParts parts;
    parts.precision = precision_.get();
    parts.readback = &readback_;
    parts.events = &events_;
    parts.faults = &faults_;
    for (const auto& p : state_.model->named_parameters()) {
      parts.params.emplace_back(p.key(), p.value());
      parts.tensors.push_back(p.value());
    }
    parts.zero_norm =
        at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
    step_ = std::make_unique<train::EagerStep>(std::move(parts), "");
  }

  // One forward, backward and update at `lr`, the loss read before it.
  // Throws StepFailure for a non-finite loss; an out-of-memory error is in
  // the result.
  train::StepResult run(double lr);
  const train::PrecisionMode& precision() const {
    return *precision_;
  }

 private:
  RepeatBatch batches_;
  train::TrainerOptions options_;
  train::RunState state_;
  train::Events events_{{}};
  train::FaultInjection faults_;
  std::unique_ptr<train::PrecisionMode> precision_;
  train::Readback readback_;
  train::Optimizer optimizer_;
  std::unique_ptr<train::EagerStep> step_;
};

} // namespace hotloop::testplan
