#include "hotloop/train/evaluation.h"

#include <algorithm>
#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/train/batch_for_model.h"
#include "hotloop/train/options.h"

namespace hotloop::train {

std::int64_t language_model_eval_batch(
    std::int64_t micro_batch,
    std::int64_t context,
    std::int64_t vocab,
    std::int64_t bytes_per_logit) {
  const auto per_sequence = static_cast<std::uint64_t>(
      std::max<std::int64_t>(context * vocab * bytes_per_logit, 1));
  const auto fits = static_cast<std::int64_t>(
      std::min<std::uint64_t>(kEvalLogitBudget / per_sequence, 256));
  return std::max<std::int64_t>({micro_batch, fits, 1});
}

std::int64_t evaluation_batch(
    const model::Model& model,
    std::int64_t micro_batch,
    Precision p) {
  const auto* lm = dynamic_cast<const model::LanguageModel*>(&model);
  if (lm == nullptr) {
    return std::max<std::int64_t>(micro_batch, 256);
  }
  const bool half = p == Precision::Bf16 || p == Precision::Fp16;
  return language_model_eval_batch(
      micro_batch, lm->context(), lm->vocab(), half ? 10 : 8);
}

Evaluator::Evaluator(
    std::shared_ptr<const data::Dataset> val,
    std::int64_t batch,
    const FaultInjection& faults,
    bool halve_on_oom)
    : val_(std::move(val)),
      batch_(std::max<std::int64_t>(batch, 1)),
      faults_(&faults),
      halve_on_oom_(halve_on_oom) {}

EvalResult Evaluator::run(
    const RunState& s,
    const PrecisionMode& precision,
    const std::function<void(const std::string&)>& log) {
  if (!val_) {
    return {};
  }
  for (;;) {
    try {
      return run_once(s, precision);
    } catch (const c10::OutOfMemoryError& e) {
      s.model->train();
      loader_.reset();
      if (s.device.is_cuda()) {
        cuda::empty_cache();
      }
      if (batch_ <= 1 || !halve_on_oom_) {
        throw;
      }
      batch_ /= 2;
      log(fmt::format(
          "evaluation: out of memory ({}); again with batch {}",
          first_line(e.what()),
          batch_));
    }
  }
}

EvalResult Evaluator::run_once(
    const RunState& s,
    const PrecisionMode& precision) {
  const TrainerOptions& o = *s.options;
  if (!loader_) {
    data::LoaderOptions lo = o.loader;
    lo.batch_size = static_cast<std::size_t>(batch_);
    lo.device = s.device;
    lo.train = false;
    lo.channels_last = o.channels_last;
    lo.shuffle = false;
    lo.drop_last = false;
    lo.rank = 0;
    lo.world_size = 1;
    lo.context = s.model->tokens_per_sample();
    lo.max_samples = lo.context > 0
        ? static_cast<std::size_t>(kLanguageModelTokens / lo.context)
        : 0;
    loader_ = data::make_loader(val_, lo);
  }
  if (s.model->tokens_per_sample() > 0) {
    return run_language_model(s, precision);
  }
  const std::int64_t k = o.model.image.num_classes;
  // Summed on the device and read once at the end, not per batch (on a GPU
  // each read waits for the stream).
  const auto on_device = at::TensorOptions().device(s.device);
  at::Tensor loss_sum = at::zeros({}, on_device.dtype(at::kDouble));
  at::Tensor confusion = at::zeros({k * k}, on_device.dtype(at::kLong));
  std::int64_t n = 0;
  each_batch(s, precision, [&](const data::Batch& b) {
    const at::Tensor logits = s.model->forward(b.images).to(at::kFloat);
    // Each batch's float sum, added in double: what adding its value on
    // the host did.
    loss_sum += s.model->loss(logits, b.labels, {0, at::Reduction::Sum})
                    .to(at::kDouble);
    // index_add_, not bincount: CUDA's bincount reads the input's maximum
    // back to size its output.
    const at::Tensor cell = b.labels * k + at::argmax(logits, 1);
    confusion.index_add_(0, cell, at::ones_like(cell));
    n += b.labels.size(0);
  });
  EvalResult r;
  r.samples = n;
  r.loss = n > 0 ? loss_sum.item<double>() / static_cast<double>(n) : 0;
  const at::Tensor cm = confusion.to(at::kCPU).reshape({k, k});
  const auto* c = cm.data_ptr<std::int64_t>();
  std::int64_t correct = 0;
  r.confusion.assign(k, std::vector<std::int64_t>(k));
  for (std::int64_t t = 0; t < k; ++t) {
    std::int64_t row = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      r.confusion[t][p] = c[t * k + p];
      row += c[t * k + p];
    }
    correct += c[t * k + t];
    r.per_class_accuracy.push_back(
        row > 0 ? static_cast<double>(c[t * k + t]) / static_cast<double>(row)
                : 0.0);
  }
  r.accuracy =
      n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0;
  return r;
}

void Evaluator::each_batch(
    const RunState& s,
    const PrecisionMode& precision,
    const std::function<void(const data::Batch&)>& each) {
  s.model->eval();
  at::NoGradGuard no_grad;
  const bool last = s.step == s.total_steps;
  loader_->start_epoch(0);
  while (auto b = loader_->next()) {
    {
      const AutocastScope autocast = precision.autocast();
      each(*b);
    }
    if (last) {
      faults_->kill_at(KillPoint::FinalEvaluation);
    }
  }
  s.model->train();
}

EvalResult Evaluator::run_language_model(
    const RunState& s,
    const PrecisionMode& precision) {
  at::Tensor loss_sum =
      at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(s.device));
  at::Tensor correct = at::zeros_like(loss_sum, at::kLong);
  // Targets the loss counts: context-only tokens (instruction data's
  // prompts, data::kNoTarget) are not.
  at::Tensor counted = at::zeros_like(loss_sum, at::kLong);
  auto* lm = dynamic_cast<model::LanguageModel*>(s.model.get());
  each_batch(s, precision, [&](const data::Batch& b) {
    if (lm != nullptr) {
      // The output layer and loss in chunks, on the positions with a target.
      const model::lm::LinearCrossEntropySums sums =
          lm->evaluation_sums(batch_for_model(b));
      loss_sum += sums.loss_sum;
      correct += sums.correct;
    } else {
      const at::Tensor logits = s.model->forward(b.images);
      loss_sum += s.model->loss(logits, b.labels, {0, at::Reduction::Sum});
      correct += at::argmax(logits, 2).eq(b.labels).sum();
    }
    counted += b.labels.ne(data::kNoTarget).sum();
  });
  const std::int64_t n = counted.item<std::int64_t>();
  EvalResult r;
  r.samples = n;
  r.loss = n > 0 ? loss_sum.item<double>() / static_cast<double>(n) : 0;
  r.accuracy = n > 0 ? static_cast<double>(correct.item<std::int64_t>()) /
          static_cast<double>(n)
                     : 0;
  r.perplexity = std::exp(r.loss);
  const auto* tokens = dynamic_cast<const data::TokenDataset*>(val_.get());
  if (tokens != nullptr && tokens->byte_level()) {
    r.bits_per_byte = r.loss / std::log(2.0);
  }
  return r;
}

} // namespace hotloop::train
