#include "hotloop/model/lm/generate.h"

#include <algorithm>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

// One token from the last position's logits over the real vocabulary.
std::int64_t sample(
    const at::Tensor& logits, // (V,) float, CPU
    const GenerateOptions& o,
    at::Generator& gen) {
  if (o.temperature <= 0) {
    return at::argmax(logits).item<std::int64_t>();
  }
  at::Tensor l = logits / o.temperature;
  if (o.top_k > 0 && o.top_k < l.size(0)) {
    const at::Tensor kth = std::get<0>(at::topk(l, o.top_k)).select(0, -1);
    l = l.masked_fill(l < kth, -std::numeric_limits<float>::infinity());
  }
  const at::Tensor p = at::softmax(l, 0);
  return at::multinomial(p, 1, false, gen).item<std::int64_t>();
}

} // namespace

std::vector<std::int64_t> generate(
    LanguageModel& model,
    const std::vector<std::int64_t>& prompt,
    const GenerateOptions& o,
    const std::function<void(std::int64_t)>& on_token) {
  const std::int64_t vocab = model.vocab();
  const std::int64_t context_length = model.context();
  if (prompt.empty()) {
    throw UsageError("generate: the prompt has no tokens");
  }
  for (const std::int64_t t : prompt) {
    if (t < 0 || t >= vocab) {
      throw UsageError(fmt::format(
          "generate: prompt token {} is outside the vocabulary of {}",
          t,
          vocab));
    }
  }
  model.eval();
  at::NoGradGuard no_grad;
  const c10::Device device = model.parameters().front().device();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  std::vector<std::int64_t> seq = prompt;
  std::vector<std::int64_t> out;
  // The last min(len, context) tokens as a (1, T) tensor.
  auto window = [&](std::size_t n) {
    const std::size_t len = std::min(seq.size(), n);
    return at::tensor(
               std::vector<std::int64_t>(
                   seq.end() - static_cast<std::ptrdiff_t>(len), seq.end()),
               at::kLong)
        .view({1, -1})
        .to(device);
  };
  const auto context = static_cast<std::size_t>(context_length);
  KvCache cache;
  at::Tensor logits;
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    if (!o.use_cache) {
      logits = model.forward(window(context));
    } else if (i == 0 || cache.length >= context_length) {
      // The prompt, or the window slid past the context: all of it again.
      cache = model.new_cache(1);
      logits = model.forward(window(context), cache);
    } else {
      logits = model.forward(window(1), cache);
    }
    const at::Tensor last = logits.select(0, 0)
                                .select(0, -1)
                                .narrow(0, 0, vocab)
                                .to(at::kCPU, at::kFloat);
    const std::int64_t next = sample(last, o, gen);
    seq.push_back(next);
    out.push_back(next);
    if (on_token) {
      on_token(next);
    }
    if (std::find(o.stop.begin(), o.stop.end(), next) != o.stop.end()) {
      break;
    }
  }
  return out;
}

} // namespace hotloop::model
