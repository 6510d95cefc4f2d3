#pragma once
// The batch-size finder: the largest micro-batch whose whole training step
// (real data path, forward, backward, optimizer) runs without running out of
// memory, and the size to train with. Sizes grow by powers of two until one
// fails, then a binary search finds the exact limit. Every trial builds its
// model, optimizer and loader afresh and releases them (and the allocator's
// cache) after, so trials do not poison each other.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/dataset.h"
#include "hotloop/model/model.h"
#include "hotloop/train/options.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::train {

struct BatchFinderOptions {
  // What each trial trains (model, precision, device, optimizer, loader);
  // batch, micro_batch, steps and the run-directory fields are set per trial.
  TrainerOptions trainer;
  std::int64_t max_batch = 4096; // the search's ceiling (and the data's size)
  // Per trial; the first 2 are warm-up. Under --cuda-graphs auto/on on a GPU,
  // more than 3 steps capture the step as the run will (3 warm-up steps).
  std::int64_t trial_steps = 5;
  // The recommendation keeps this share of the memory free: its peak reserved
  // memory stays under (1 - margin) x what the process can use (on the CPU,
  // where memory is not measured, its size stays under (1 - margin) x
  // max_batch).
  double margin = 0.10;
  // A larger size is recommended over a smaller one only when it is faster
  // by more than this share of images/s.
  double speed_tolerance = 0.03;
};

struct BatchTrial {
  std::int64_t size = 0;
  bool ok = false; // false: out of memory
  double images_per_s = 0; // median of the steps after warm-up
  double tokens_per_s = 0; // language models: images_per_s x tokens/sample
  // CUDA; on the CPU where host memory is counted (train/host_memory.h)
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0; // CUDA
  double seconds = 0; // the trial's wall time
  std::string note; // why it did not fit, when the error alone does not say
  // Samples in an epoch of the data for this trial's model (a language
  // model's windows at its context), per rank; 0: unknown.
  std::int64_t data_samples = 0;
  // "1234 images/s", or "56789 tokens/s" for a language model.
  std::string rate() const;
};

// What the model holds before any activation: its weights, and for what
// trains, gradients and optimizer state (float32); beside it what training
// every weight would hold (LoRA's saving).
struct ModelState {
  std::int64_t parameters = 0;
  std::int64_t trainable = 0;
  std::uint64_t weight_bytes = 0; // as stored (a LoRA bf16 base: bf16)
  std::uint64_t gradient_bytes = 0;
  std::uint64_t optimizer_bytes = 0; // AdamW: 2 moments; SGD: momentum
  std::uint64_t full_gradient_bytes = 0; // every weight trained
  std::uint64_t full_optimizer_bytes = 0;
  nlohmann::json to_json() const;
  // "weights 1.9 GiB; gradients 17 MiB + AdamW state 35 MiB for 4.4M
  // trainable of 494M parameters (training every weight: 1.9 GiB + 3.7 GiB)"
  std::string describe(const std::string& optimizer) const;
};
// The state of `model` as `o` trains it (LoRA adapters added, a bf16 base
// stored in bf16).
ModelState model_state(model::Model& model, const TrainerOptions& o);

struct BatchFinderResult {
  std::int64_t max_batch = 0; // 0: not even one sample fits
  bool reached_ceiling = false; // no OOM up to max_batch: the limit is higher
  std::int64_t recommended = 0;
  std::string reason; // why `recommended`
  std::string device;
  std::uint64_t memory_budget_bytes = 0; // CUDA: (1 - margin) x usable
  std::vector<BatchTrial> trials; // in the order run
  ModelState state;
  std::string optimizer; // "AdamW" or "SGD", for the state's line
  nlohmann::json to_json() const;
};

// Builds a fresh model for each trial (seeded, on the CPU; the trainer moves
// it).
using ModelFactory = std::function<std::shared_ptr<model::Model>()>;
// The factory for `o`'s model: make_model(o.model) after seeding with o.seed.
ModelFactory model_factory(const TrainerOptions& o);
// Called after each trial (progress).
using TrialCallback = std::function<void(const BatchTrial&)>;

// Throws what a trial throws other than out of memory (bad data, bad
// options). `group`: a sharded data-parallel job's (options.trainer.shard 1
// or more): each trial trains sharded over it, every rank in step, so what
// it measures is what a rank of the sharded run holds (at the run's stage,
// an OOM inside a block's gather at stage 3 included), and
// a trial fits only where it fits on every rank; an OOM outside a step's
// agreement (building the model) is an error there. Without one, or
// unsharded, each trial runs in this process alone.
BatchFinderResult find_batch_size(
    const ModelFactory& make_model,
    std::shared_ptr<const data::Dataset> train,
    const BatchFinderOptions& options,
    const TrialCallback& on_trial = {},
    std::shared_ptr<parallel::ProcessGroup> group = nullptr);

// One trial at micro-batch = batch = `size`: options.trial_steps steps in
// one process, unsharded, everything built afresh and released after, with
// its peak memory from the model's construction on.
BatchTrial run_batch_trial(
    std::int64_t size,
    const ModelFactory& make_model,
    const std::shared_ptr<const data::Dataset>& train,
    const BatchFinderOptions& options);

// Sets r.recommended and r.reason from r's trials, max_batch and memory
// budget: among the sizes that ran and keep the margin, the smallest that no
// larger one beats by more than the speed tolerance.
void recommend_batch_size(
    BatchFinderResult& r,
    const BatchFinderOptions& options);

// --batch and --micro-batch as given: a number, or nullopt for "auto".
struct BatchRequest {
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> micro_batch; // 0: the whole batch
};

struct ResolvedBatch {
  std::int64_t batch = 0; // global, per optimizer step
  std::int64_t micro_batch = 0; // 0: the whole batch
  std::optional<BatchFinderResult> found; // when the finder ran
  std::vector<std::string> notes; // what was decided, for the log
};

// Resolves "auto": --batch auto trains at the finder's recommendation (times
// the ranks); --batch N --micro-batch auto keeps the effective batch N with
// the largest micro-batch up to the recommendation that divides each rank's
// share. In a data-parallel job (`group`) every rank runs the finder (a
// sharded job's trials sharded over it) and all take the smallest rank's
// finding. Without "auto", the numbers as given.
// Throws UsageError for --batch auto with a fixed micro-batch,
// OutOfMemoryError when not even one sample fits.
ResolvedBatch resolve_batch(
    const BatchRequest& request,
    BatchFinderOptions finder,
    const ModelFactory& make_model,
    const std::shared_ptr<const data::Dataset>& train,
    const std::shared_ptr<parallel::ProcessGroup>& group,
    const TrialCallback& on_trial = {});

} // namespace hotloop::train
