#pragma once
// Evaluation: one pass over the validation set in eval mode, under the run's
// autocast, giving the loss, the accuracy, each class's accuracy and the
// confusion matrix; for a language model, the next-token loss, accuracy,
// perplexity and (byte-level data) bits per byte over at most
// kLanguageModelTokens tokens of evenly spaced windows. The batch is an
// image model's micro-batch or 256, whichever is larger; a language model's
// is sized from its logits' bytes (evaluation_batch). Out of memory halves
// the evaluation batch and starts the pass again (it changes no state),
// where the evaluation runs alone.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"
#include "hotloop/model/model.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

// A language model's evaluation batch: each sequence holds `context` x
// `vocab` logits of `bytes_per_logit` bytes (the logits in the run's
// precision, their fp32 copy and the loss's log-softmax: 10 in bf16/fp16, 8
// in fp32). Never below the micro-batch (training held that many sequences'
// logits, and their gradients, beside its state), above it only as far as
// kEvalLogitBudget holds, and at most 256: Qwen2.5's 151,936-token
// vocabulary at context 1024 in bf16 (1.6 GB a sequence) evaluates at the
// micro-batch, where 256 sequences would have needed 400 GB; gpt-nano's 256
// at 128 (330 kB) at 256.
inline constexpr std::uint64_t kEvalLogitBudget = 256ULL << 20;
std::int64_t language_model_eval_batch(
    std::int64_t micro_batch,
    std::int64_t context,
    std::int64_t vocab,
    std::int64_t bytes_per_logit);

// The batch an evaluation of `model` starts at, training with `micro_batch`
// in precision `p`: an image model's max(micro_batch, 256), a language
// model's language_model_eval_batch.
std::int64_t evaluation_batch(
    const model::Model& model,
    std::int64_t micro_batch,
    Precision p);

class Evaluator {
 public:
  // A language model's evaluation reads at most this many tokens (2^20).
  static constexpr std::int64_t kLanguageModelTokens = 1 << 20;
  // `val` may be null (no evaluation). The batch starts at `batch`
  // (evaluation_batch). `halve_on_oom` false: an out-of-memory is the
  // caller's error (ZeRO stage 3, whose ranks evaluate in step: one rank
  // starting again alone would leave the others in a block's gather).
  Evaluator(
      std::shared_ptr<const data::Dataset> val,
      std::int64_t batch,
      const FaultInjection& faults,
      bool halve_on_oom = true);

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
  // Every batch of the validation data, with the model in eval mode,
  // without gradients, under the run's autocast.
  void each_batch(
      const RunState& s,
      const PrecisionMode& precision,
      const std::function<void(const data::Batch&)>& each);
  EvalResult run_language_model(
      const RunState& s,
      const PrecisionMode& precision);

  std::shared_ptr<const data::Dataset> val_;
  std::int64_t batch_;
  const FaultInjection* faults_;
  bool halve_on_oom_;
  std::unique_ptr<data::EpochLoader> loader_;
};

} // namespace hotloop::train
