// Language models on packed rows (model/model_batch.h): a row of several
// examples gives each example the logits and the gradients it has alone, for
// GPT (learned positions) and Llama (rotary positions, grouped keys and
// values), with activation checkpointing too; the block-causal mask's shape;
// and models that cannot take packed rows say so.

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/document_attention.h"
#include "hotloop/model/model.h"

namespace hotloop::model {
namespace {

constexpr std::int64_t kVocab = 50;
constexpr std::int64_t kContext = 16;

std::shared_ptr<LanguageModel> tiny_gpt() {
  GptConfig c;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.context = kContext;
  c.vocab = kVocab;
  torch::manual_seed(0);
  return std::make_shared<Gpt>(c);
}

std::shared_ptr<LanguageModel> tiny_llama() {
  LlamaConfig c;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.width = 32;
  c.intermediate = 64;
  c.context = kContext;
  c.max_positions = kContext;
  c.vocab = kVocab;
  c.tied = false;
  torch::manual_seed(0);
  return std::make_shared<Llama>(c);
}

// Rows of kContext tokens holding examples of the given lengths, the rest
// padding; with the example tokens, targets within each example (its last
// token none), positions and starts as the loader makes them.
struct Packed {
  ModelBatch batch;
  std::vector<at::Tensor> examples; // each (1, n) token ids
  std::vector<std::pair<std::int64_t, std::int64_t>> where; // (row, offset)
};

Packed pack(const std::vector<std::vector<std::int64_t>>& rows) {
  at::manual_seed(7);
  Packed p;
  const auto b = static_cast<std::int64_t>(rows.size());
  at::Tensor inputs = at::zeros({b, kContext}, at::kLong);
  at::Tensor targets = at::full({b, kContext}, -100, at::kLong);
  at::Tensor positions = at::zeros({b, kContext}, at::kLong);
  std::vector<std::int32_t> starts;
  std::int64_t longest = 0;
  for (std::int64_t r = 0; r < b; ++r) {
    std::int64_t at = 0;
    auto sequence = [&](std::int64_t n) {
      starts.push_back(static_cast<std::int32_t>(r * kContext + at));
      positions[r].narrow(0, at, n).copy_(at::arange(n));
      longest = std::max(longest, n);
    };
    for (const std::int64_t n : rows[static_cast<std::size_t>(r)]) {
      const at::Tensor e = at::randint(1, kVocab, {n}, at::kLong);
      inputs[r].narrow(0, at, n).copy_(e);
      targets[r].narrow(0, at, n - 1).copy_(e.narrow(0, 1, n - 1));
      p.examples.push_back(e.unsqueeze(0));
      p.where.emplace_back(r, at);
      sequence(n);
      at += n;
    }
    if (at < kContext) {
      sequence(kContext - at);
    }
  }
  starts.push_back(static_cast<std::int32_t>(b * kContext));
  p.batch.inputs = inputs;
  p.batch.targets = targets;
  p.batch.rows.positions = positions;
  p.batch.rows.starts = at::tensor(starts, at::kInt);
  p.batch.rows.longest = longest;
  p.batch.trained = targets.ne(-100).sum().item<std::int64_t>();
  return p;
}

const std::vector<std::vector<std::int64_t>> kRows = {{5, 3, 6}, {7, 9}, {16}};

void expect_logits_per_example(LanguageModel& m) {
  m.eval();
  at::NoGradGuard no_grad;
  const Packed p = pack(kRows);
  const at::Tensor packed = at::linear(
      m.hidden_states(p.batch.inputs, p.batch.rows), m.output_weight());
  for (std::size_t e = 0; e < p.examples.size(); ++e) {
    const auto [row, offset] = p.where[e];
    const std::int64_t n = p.examples[e].size(1);
    const at::Tensor alone = m.forward(p.examples[e])[0];
    const at::Tensor in_row = packed[row].narrow(0, offset, n);
    EXPECT_TRUE(at::allclose(in_row, alone, 1e-5, 1e-5))
        << "example " << e << ": "
        << (in_row - alone).abs().max().item<double>();
  }
}

// The packed batch's summed loss against each example's alone: the same
// loss and the same gradient in every parameter.
void expect_gradients_per_example(
    const std::shared_ptr<LanguageModel>& packed_model,
    const std::shared_ptr<LanguageModel>& alone_model) {
  const Packed p = pack(kRows);
  const LossOptions sum{0, at::Reduction::Sum};
  const at::Tensor packed = packed_model->objective(p.batch, sum);
  packed.backward();
  at::Tensor alone = at::zeros({});
  for (const at::Tensor& e : p.examples) {
    ModelBatch b;
    const std::int64_t n = e.size(1);
    b.inputs = e.narrow(1, 0, n - 1);
    b.targets = e.narrow(1, 1, n - 1);
    alone = alone + alone_model->objective(b, sum);
  }
  alone.backward();
  EXPECT_NEAR(
      packed.item<double>(), alone.item<double>(), 1e-5 * alone.item<double>());
  const auto a = packed_model->named_parameters();
  const auto b = alone_model->named_parameters();
  for (const auto& item : a) {
    const at::Tensor ga = item.value().grad();
    const at::Tensor gb = b[item.key()].grad();
    ASSERT_TRUE(ga.defined()) << item.key();
    EXPECT_TRUE(at::allclose(ga, gb, 1e-5, 1e-6))
        << item.key() << ": " << (ga - gb).abs().max().item<double>();
  }
}

TEST(PackedRows, GptGivesEachExampleItsOwnLogits) {
  expect_logits_per_example(*tiny_gpt());
}

TEST(PackedRows, LlamaGivesEachExampleItsOwnLogits) {
  expect_logits_per_example(*tiny_llama());
}

TEST(PackedRows, GptGivesEachExampleItsOwnGradients) {
  expect_gradients_per_example(tiny_gpt(), tiny_gpt());
}

TEST(PackedRows, LlamaGivesEachExampleItsOwnGradients) {
  expect_gradients_per_example(tiny_llama(), tiny_llama());
}

TEST(PackedRows, ActivationCheckpointingKeepsTheRowsApart) {
  for (auto make : {&tiny_gpt, &tiny_llama}) {
    const auto packed = make();
    packed->set_checkpointing(Checkpointing::Blocks);
    expect_gradients_per_example(packed, make());
  }
}

TEST(PackedRows, TheMaskKeepsEachTokenToTheEarlierTokensOfItsSequence) {
  const at::Tensor positions =
      at::tensor({0, 1, 2, 0, 1, 0}, at::kLong).view({1, 6});
  const at::Tensor mask = lm::block_causal_mask(positions)[0];
  const at::Tensor expected = at::tensor(
                                  {1, 0, 0, 0, 0, 0, //
                                   1, 1, 0, 0, 0, 0, //
                                   1, 1, 1, 0, 0, 0, //
                                   0, 0, 0, 1, 0, 0, //
                                   0, 0, 0, 1, 1, 0, //
                                   0, 0, 0, 0, 0, 1},
                                  at::kLong)
                                  .view({6, 6})
                                  .to(at::kBool);
  EXPECT_TRUE(at::equal(mask, expected));
}

// CUDA's fp32 path, the block-causal mask, gives what the CPU's path (each
// sequence alone) gives, grouped keys and values included.
TEST(PackedRows, TheMaskAndEachSequenceAloneAttendAlike) {
  const Packed p = pack(kRows);
  at::manual_seed(3);
  const std::int64_t b = p.batch.inputs.size(0);
  const at::Tensor q = at::randn({b, 4, kContext, 8});
  const at::Tensor k = at::randn({b, 2, kContext, 8});
  const at::Tensor v = at::randn({b, 2, kContext, 8});
  const lm::AttentionPlan alone =
      lm::plan_attention(p.batch.rows, at::zeros({b, kContext, 32}), 8);
  ASSERT_EQ(alone.path, lm::AttentionPath::PerSequence);
  lm::AttentionPlan masked = alone;
  masked.path = lm::AttentionPath::Mask;
  masked.mask = lm::block_causal_mask(p.batch.rows.positions).unsqueeze(1);
  EXPECT_TRUE(at::allclose(
      lm::attend(q, k, v, masked), lm::attend(q, k, v, alone), 1e-5, 1e-6));
}

TEST(PackedRows, StartsThatCrossARowAreRefused) {
  Packed p = pack(kRows);
  p.batch.rows.starts = at::tensor({0, 10, 20, 48}, at::kInt);
  EXPECT_THROW(lm::check_starts(p.batch.rows, kContext), UsageError);
}

// scripts/gpu-check's gpu-tests stage: on a GPU in bf16 the rows go through
// flash attention's variable-length form, and give each example what
// per-example SDPA gives it (bf16's rounding apart).
TEST(PackedRows, OnAGpuVarlenFlashGivesEachExampleItsOwnLogitsInBf16) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  const auto m = tiny_llama();
  m->to(at::kCUDA);
  m->eval();
  at::NoGradGuard no_grad;
  Packed p = pack(kRows);
  p.batch.inputs = p.batch.inputs.cuda();
  p.batch.rows.positions = p.batch.rows.positions.cuda();
  p.batch.rows.starts = p.batch.rows.starts.cuda();
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  const at::Tensor x =
      at::zeros({1, 1, 32}, at::TensorOptions().device(at::kCUDA));
  EXPECT_EQ(
      lm::plan_attention(p.batch.rows, x, 8).path, lm::AttentionPath::Varlen);
  const at::Tensor packed =
      at::linear(
          m->hidden_states(p.batch.inputs, p.batch.rows), m->output_weight())
          .to(at::kFloat);
  for (std::size_t e = 0; e < p.examples.size(); ++e) {
    const auto [row, offset] = p.where[e];
    const std::int64_t n = p.examples[e].size(1);
    const at::Tensor alone = m->forward(p.examples[e].cuda())[0].to(at::kFloat);
    const at::Tensor in_row = packed[row].narrow(0, offset, n);
    EXPECT_TRUE(at::allclose(in_row, alone, 3e-2, 3e-2))
        << "example " << e << ": "
        << (in_row - alone).abs().max().item<double>();
  }
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
}

// The same through backward: flash's variable-length gradient gives each
// parameter the per-example gradient, within bf16's rounding of the
// largest.
TEST(PackedRows, OnAGpuVarlenFlashGivesEachExampleItsOwnGradientsInBf16) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  const auto packed_model = tiny_llama();
  const auto alone_model = tiny_llama();
  packed_model->to(at::kCUDA);
  alone_model->to(at::kCUDA);
  Packed p = pack(kRows);
  p.batch.inputs = p.batch.inputs.cuda();
  p.batch.targets = p.batch.targets.cuda();
  p.batch.rows.positions = p.batch.rows.positions.cuda();
  p.batch.rows.starts = p.batch.rows.starts.cuda();
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  const LossOptions sum{0, at::Reduction::Sum};
  packed_model->objective(p.batch, sum).backward();
  at::Tensor alone = at::zeros({}, at::TensorOptions().device(at::kCUDA));
  for (const at::Tensor& e : p.examples) {
    ModelBatch b;
    const std::int64_t n = e.size(1);
    b.inputs = e.narrow(1, 0, n - 1).cuda();
    b.targets = e.narrow(1, 1, n - 1).cuda();
    alone = alone + alone_model->objective(b, sum);
  }
  alone.backward();
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  const auto b = alone_model->named_parameters();
  for (const auto& item : packed_model->named_parameters()) {
    const at::Tensor ga = item.value().grad().to(at::kFloat);
    const at::Tensor gb = b[item.key()].grad().to(at::kFloat);
    const double scale = gb.abs().max().item<double>();
    EXPECT_LE((ga - gb).abs().max().item<double>(), 5e-2 * scale + 1e-6)
        << item.key();
  }
}

TEST(PackedRows, AModelThatCannotTakeThemSaysSo) {
  torch::manual_seed(0);
  const auto m = make_model(ModelOptions().set_name("mlp"));
  ModelBatch b;
  b.inputs = at::randn({2, 1, 28, 28});
  b.targets = at::zeros({2}, at::kLong);
  b.rows.positions = at::zeros({2, 4}, at::kLong);
  EXPECT_THROW(m->objective(b, {}), UsageError);
}

} // namespace
} // namespace hotloop::model
