// The chunked output layer and loss (model/lm/linear_cross_entropy.h)
// against at::linear + cross-entropy: loss and gradients within 1e-6
// relative in float32, over chunk boundaries that do and do not divide the
// tokens, with ignored targets, label smoothing, sum and mean; bf16
// autocast within bf16's rounding; and evaluation's sums.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "hotloop/model/lm/linear_cross_entropy.h"

namespace hotloop::model::lm {
namespace {

struct Case {
  at::Tensor hidden;
  at::Tensor weight;
  at::Tensor targets;
};

Case make_case(std::int64_t n, std::int64_t c, std::int64_t v) {
  at::manual_seed(3);
  Case k;
  k.hidden = at::randn({n, c}, at::kDouble).to(at::kFloat);
  k.weight = (at::randn({v, c}, at::kDouble) * 0.3).to(at::kFloat);
  k.targets = at::randint(0, v, {n}, at::kLong);
  // Every third target is ignored, as a prompt's are.
  k.targets.index_put_({at::arange(0, n, 3)}, -100);
  return k;
}

struct Result {
  at::Tensor loss;
  at::Tensor grad_hidden;
  at::Tensor grad_weight;
};

template <typename F>
Result run(const Case& k, F loss_of) {
  const at::Tensor h = k.hidden.clone().requires_grad_(true);
  const at::Tensor w = k.weight.clone().requires_grad_(true);
  const at::Tensor loss = loss_of(h, w);
  // A gradient other than 1, as a loss scale or an accumulation's share
  // makes it.
  (loss * 3.0).backward();
  return {loss.detach(), h.grad(), w.grad()};
}

Result reference(const Case& k, const LossOptions& o) {
  return run(k, [&](const at::Tensor& h, const at::Tensor& w) {
    return at::cross_entropy_loss(
        at::linear(h, w), k.targets, {}, o.reduction, -100, o.label_smoothing);
  });
}

Result chunked(const Case& k, const LossOptions& o, std::int64_t chunk) {
  return run(k, [&](const at::Tensor& h, const at::Tensor& w) {
    LinearCrossEntropyOptions c;
    c.loss = o;
    c.chunk_tokens = chunk;
    return linear_cross_entropy(h, w, k.targets, c);
  });
}

void expect_equal(const Result& a, const Result& b, double rtol) {
  EXPECT_TRUE(at::allclose(a.loss, b.loss, rtol, 0))
      << a.loss.item<double>() << " vs " << b.loss.item<double>();
  EXPECT_TRUE(at::allclose(a.grad_hidden, b.grad_hidden, rtol, 1e-7))
      << (a.grad_hidden - b.grad_hidden).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(a.grad_weight, b.grad_weight, rtol, 1e-7))
      << (a.grad_weight - b.grad_weight).abs().max().item<double>();
}

TEST(LinearCrossEntropy, EqualsTheUnchunkedLayerAndLossAcrossChunks) {
  const Case k = make_case(23, 16, 37);
  for (const std::int64_t chunk : {1, 4, 7, 22, 23, 100}) {
    SCOPED_TRACE(chunk);
    expect_equal(chunked(k, {}, chunk), reference(k, {}), 1e-6);
  }
}

TEST(LinearCrossEntropy, EqualsItWithLabelSmoothingAndASum) {
  const Case k = make_case(19, 8, 29);
  const LossOptions smooth{0.1, at::Reduction::Mean};
  expect_equal(chunked(k, smooth, 5), reference(k, smooth), 1e-6);
  const LossOptions sum{0, at::Reduction::Sum};
  expect_equal(chunked(k, sum, 5), reference(k, sum), 1e-6);
}

TEST(LinearCrossEntropy, TakesNoGradientForAFrozenWeight) {
  const Case k = make_case(9, 8, 11);
  const at::Tensor h = k.hidden.clone().requires_grad_(true);
  const at::Tensor loss = linear_cross_entropy(h, k.weight, k.targets);
  loss.backward();
  EXPECT_TRUE(h.grad().defined());
  EXPECT_FALSE(k.weight.grad().defined());
}

TEST(LinearCrossEntropy, UnderBf16AutocastItMatchesTheAutocastLayer) {
  const Case k = make_case(40, 32, 64);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  const Result a = chunked(k, {}, 9);
  const Result b = reference(k, {});
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  // bf16 products (8 bits of mantissa) summed in another order.
  EXPECT_TRUE(at::allclose(a.loss, b.loss, 1e-2, 0));
  EXPECT_TRUE(at::allclose(a.grad_hidden, b.grad_hidden, 5e-2, 1e-3));
  EXPECT_TRUE(at::allclose(a.grad_weight, b.grad_weight, 5e-2, 1e-3));
  EXPECT_EQ(a.grad_hidden.scalar_type(), at::kFloat);
}

TEST(LinearCrossEntropy, EvaluationSumsAreTheLossSumAndTheArgmaxHits) {
  const Case k = make_case(31, 8, 13);
  LinearCrossEntropyOptions o;
  o.chunk_tokens = 6;
  const LinearCrossEntropySums s =
      linear_cross_entropy_sums(k.hidden, k.weight, k.targets, o);
  const at::Tensor logits = at::linear(k.hidden, k.weight);
  const double sum =
      at::cross_entropy_loss(logits, k.targets, {}, at::Reduction::Sum, -100)
          .item<double>();
  EXPECT_NEAR(s.loss_sum.item<double>(), sum, 1e-5 * sum);
  const at::Tensor counted = k.targets.ne(-100);
  const std::int64_t hits = (at::argmax(logits, 1).eq(k.targets) & counted)
                                .sum()
                                .item<std::int64_t>();
  EXPECT_EQ(s.correct.item<std::int64_t>(), hits);
}

TEST(LinearCrossEntropy, UnderFp16TheWeightsGradientDoesNotOverflow) {
  // 4096 tokens all naming token 5, hidden states of 32: the weight's
  // gradient row is a sum of about -32 x 4096 = -131072, past fp16's 65504.
  Case k;
  k.hidden = at::full({4096, 8}, 32.0);
  k.weight = at::zeros({256, 8});
  k.targets = at::full({4096}, 5, at::kLong);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::autocast::set_autocast_dtype(at::kCPU, at::kHalf);
  LinearCrossEntropyOptions o;
  o.loss.reduction = at::Reduction::Sum;
  const Result a = run(k, [&](const at::Tensor& h, const at::Tensor& w) {
    return linear_cross_entropy(h, w, k.targets, o);
  });
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  const Result b = reference(k, o.loss);
  ASSERT_TRUE(a.grad_weight.isfinite().all().item<bool>());
  EXPECT_TRUE(at::allclose(a.grad_weight, b.grad_weight, 1e-3, 1e-3))
      << (a.grad_weight - b.grad_weight).abs().max().item<double>();
}

TEST(LinearCrossEntropy, AMeanOverNoTargetIsZeroWithNoGradient) {
  Case k = make_case(6, 8, 11);
  k.targets.fill_(-100);
  const Result r = chunked(k, {}, 4);
  EXPECT_EQ(r.loss.item<double>(), 0.0);
  EXPECT_EQ(r.grad_hidden.abs().max().item<double>(), 0.0);
}

TEST(LinearCrossEntropy, AChunkKeepsItsLogitsNearTwoToThe26Elements) {
  EXPECT_EQ(chunk_tokens(151936, {}), 441);
  EXPECT_EQ(chunk_tokens(256, {}), 262144);
  EXPECT_EQ(chunk_tokens(std::int64_t{1} << 30, {}), 1);
}

} // namespace
} // namespace hotloop::model::lm
