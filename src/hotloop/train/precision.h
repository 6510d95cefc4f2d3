#pragma once
// A run's precision as one interface: what a training step asks of it
// (the autocast region its forward pass runs in, the tensor its backward
// starts from, the check before its update, whether a CUDA graph can capture
// it) and what the run keeps of it (checkpoint state, skipped steps, the
// loss scale it logs). Each mode is one implementation; make_precision picks
// it. The steps (eager_step, graph_step), the graph policy, evaluation and
// checkpoints see only this interface, so a new mode is one new
// implementation and a case in make_precision (docs/training.md).
//
// The modes: fp32, tf32, bf16 and fp16 (one implementation: autocast for
// the last two; tf32 differs in the math mode), and loss scaling
// (loss_scaler.h) over any of them: fp16's by default, any mode's under
// --loss-scaling on.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "hotloop/model/weights.h"
#include "hotloop/train/options.h"

namespace hotloop::train {

// "Mixed precision" made concrete for `device`: bf16 on the CPU and on GPUs
// of compute capability 8.0 and up, else fp16 (with loss scaling).
Precision mixed_precision_for(const c10::Device& device);

// The precision `hotloop predict` and `generate` run a trained model in:
// `asked` when the user chose one; on the CPU (`gpu` nullopt) fp32; on a GPU
// (`gpu`: its mixed precision) the precision the model trained in
// (`trained`: its run's config.json, a Hugging Face folder's dtype; bf16 on
// a GPU without it: fp32), else a language model's recipe (bf16 where the
// GPU has it, else fp32). Throws UsageError for fp16 on the CPU.
struct InferencePrecision {
  Precision precision = Precision::Fp32;
  std::string why; // "asked", "the CPU", "trained in", "the recipe"
};
InferencePrecision inference_precision(
    std::optional<Precision> asked,
    std::optional<Precision> trained,
    std::optional<Precision> gpu);

// The type `p` computes in under autocast (bf16 or fp16); Undefined for the
// modes that compute in fp32 (fp32, tf32).
c10::ScalarType compute_dtype(Precision p);

// Sets the process's TF32 switches for `p` on CUDA (fp32: full fp32
// everywhere; every other mode: matmul and cuDNN convolutions left in fp32
// run in TF32). No-op on the CPU.
void configure_math_mode(Precision p, const c10::Device& device);

// Turns autocast on for `device` in bf16 or fp16 for its lifetime (no-op for
// fp32 and tf32), and restores the previous state after. Throws UsageError for
// fp16 on the CPU (no CPU fp16 autocast worth having: use bf16).
// `cache` false: weights are cast anew at each use instead of once per region
// (what a CUDA graph capture needs: the cache would hand the graph tensors
// freed at the region's end).
class AutocastScope {
 public:
  AutocastScope(Precision p, const c10::Device& device, bool cache = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = false;
  bool was_enabled_ = false;
  bool was_caching_ = true;
  c10::ScalarType was_dtype_ = c10::kFloat;
};

class PrecisionMode {
 public:
  virtual ~PrecisionMode() = default;

  // The --precision word this mode runs (fp16 under loss scaling is Fp16).
  virtual Precision precision() const = 0;

  // What a step asks.
  // The region the forward pass runs in (an inactive scope where the mode
  // computes in fp32). `cache` false for a CUDA graph capture.
  virtual AutocastScope autocast(bool cache = true) const = 0;
  // The tensor backward starts from: the loss, or the loss times a scale.
  virtual at::Tensor scale(const at::Tensor& loss) const {
    return loss;
  }
  // After backward, before the update, on the trainable `params` (`named`:
  // the same by name, for messages): true when step `step` (1-based) must
  // be skipped. May throw StepFailure (the mode cannot go on).
  virtual bool unscale_and_check(
      const model::StateDict& named,
      const std::vector<at::Tensor>& params,
      std::int64_t step);
  // True where the mode owns an overflowing step (it skips it), so that a
  // non-finite loss is not the run's error.
  virtual bool skips_overflow() const {
    return false;
  }
  // Why a step in this mode cannot be captured as a CUDA graph (a decision
  // on the host between its kernels); empty when it can.
  virtual std::string capture_blocker() const {
    return {};
  }

  // What a run keeps.
  // Steps skipped so far (the schedule counts only applied ones).
  virtual std::int64_t skipped_steps() const {
    return 0;
  }
  // The loss scale for the step log; 0 where the mode has none.
  virtual double loss_scale() const {
    return 0;
  }
  // For checkpoints. A mode without state writes none and ignores what a
  // checkpoint holds (the resume check has already required the same mode).
  virtual model::StateDict state() const {
    return {};
  }
  virtual void load_state(const model::StateDict& state);
};

// The mode for --precision `p` and --loss-scaling `scaling` on `device`.
// Throws UsageError for fp16 on the CPU.
std::unique_ptr<PrecisionMode> make_precision(
    Precision p,
    LossScaling scaling,
    const c10::Device& device);

} // namespace hotloop::train
