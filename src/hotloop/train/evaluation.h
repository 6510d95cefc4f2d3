#pragma once
// Evaluation: one pass over the validation set in eval mode, under the run's
// autocast, giving the loss, the accuracy, each class's accuracy and the
// confusion matrix; for a language model, the next-token loss, accuracy,
// perplexity and (byte-level data) bits per byte over at most
// kLanguageModelTokens tokens of evenly spaced windows. Out of memory halves
// the evaluation batch and starts the pass again (it changes no state).

#include <functional>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

class Evaluator {
 public:
  // A language model's evaluation reads at most this many tokens (2^20).
  static constexpr std::int64_t kLanguageModelTokens = 1 << 20;
  // `val` may be null (no evaluation). The batch starts at the larger of
  // the micro-batch and 256.
  Evaluator(
      std::shared_ptr<const data::Dataset> val,
      std::int64_t micro_batch,
      const FaultInjection& faults);

  bool has_data() const {
    return val_ != nullptr;
  }
  // An empty result without data.
  EvalResult run(
      const RunState& s,
      const PrecisionMode& precision,
      const std::function<void(const std::string&)>& log);

 private:
  EvalResult run_once(const RunState& s, const PrecisionMode& precision);
  // The validation data through the model in eval mode, without gradients,
  // under the run's autocast: `each` gets every batch's logits.
  void forward_all(
      const RunState& s,
      const PrecisionMode& precision,
      const std::function<void(const at::Tensor&, const data::Batch&)>& each);
  EvalResult run_language_model(
      const RunState& s,
      const PrecisionMode& precision);

  std::shared_ptr<const data::Dataset> val_;
  std::int64_t batch_;
  const FaultInjection* faults_;
  std::unique_ptr<data::EpochLoader> loader_;
};

} // namespace hotloop::train
