// The GPT language model: Hugging Face GPT-2's names and layouts, shapes,
// causality, the KV cache against the full forward, activation
// checkpointing's gradients, which parameters decay, and the FLOP count.

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/lm/generate.h"
#include "support/autograd_graph.h"

namespace hotloop::model {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.context = 12;
  c.vocab = 50; // padded to 64
  return c;
}

std::shared_ptr<Gpt> make_tiny(std::uint64_t seed = 0) {
  torch::manual_seed(seed);
  return std::make_shared<Gpt>(tiny());
}

at::Tensor tokens(std::int64_t b, std::int64_t t, std::uint64_t seed = 1) {
  at::manual_seed(seed);
  return at::randint(50, {b, t}, at::kLong);
}

TEST(Gpt, ParametersHaveHuggingFaceGpt2NamesAndConv1DLayout) {
  const auto m = make_tiny();
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& p : m->named_parameters()) {
    shapes[p.key()] = p.value().sizes().vec();
  }
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(shapes.at("transformer.wte.weight"), (V{64, 16}));
  EXPECT_EQ(shapes.at("transformer.wpe.weight"), (V{12, 16}));
  EXPECT_EQ(shapes.at("transformer.h.1.ln_1.weight"), (V{16}));
  // Conv1D: (in, out), as GPT2LMHeadModel stores it.
  EXPECT_EQ(shapes.at("transformer.h.0.attn.c_attn.weight"), (V{16, 48}));
  EXPECT_EQ(shapes.at("transformer.h.0.attn.c_attn.bias"), (V{48}));
  EXPECT_EQ(shapes.at("transformer.h.0.attn.c_proj.weight"), (V{16, 16}));
  EXPECT_EQ(shapes.at("transformer.h.0.mlp.c_fc.weight"), (V{16, 64}));
  EXPECT_EQ(shapes.at("transformer.h.0.mlp.c_proj.weight"), (V{64, 16}));
  EXPECT_EQ(shapes.at("transformer.ln_f.bias"), (V{16}));
  // Tied output: no lm_head parameter of its own.
  EXPECT_FALSE(shapes.contains("lm_head.weight"));
  EXPECT_EQ(shapes.size(), 4u + 2 * 12u);
  // The analytic count is the real one, less the positions.
  std::int64_t n = 0;
  for (const auto& p : m->parameters()) {
    n += p.numel();
  }
  EXPECT_EQ(tiny().non_embedding_parameters(), n - 12 * 16);
}

TEST(Gpt, NamedSizesAndFlagsMakeTheConfiguration) {
  ModelOptions o;
  o.name = "gpt2";
  const GptConfig g = gpt_config(o);
  EXPECT_EQ(g.layers, 12);
  EXPECT_EQ(g.heads, 12);
  EXPECT_EQ(g.width, 768);
  EXPECT_EQ(g.context, 1024);
  EXPECT_EQ(g.vocab, 50257);
  EXPECT_EQ(g.padded_vocab(), 50304); // a multiple of 64, as llm.c pads
  // 124M parameters (with the padded rows and the positions).
  EXPECT_NEAR(
      static_cast<double>(g.non_embedding_parameters() + 1024 * 768),
      124.5e6,
      0.5e6);
  // 6N + 12 L T C: nanoGPT's figure for GPT-2 124M at context 1024.
  EXPECT_NEAR(
      g.training_flops_per_token(), 6 * 123.7e6 + 12 * 12 * 1024 * 768, 1e7);
  o.name = "gpt-nano";
  o.lm.layers = 3;
  o.lm.context = 64;
  const GptConfig n = gpt_config(o);
  EXPECT_EQ(n.layers, 3);
  EXPECT_EQ(n.heads, 4);
  EXPECT_EQ(n.width, 128);
  EXPECT_EQ(n.context, 64);
  o.lm.heads = 3; // 128 is not a multiple of 3
  EXPECT_THROW(gpt_config(o), UsageError);
}

// --layers 0 is "the size's" (gpt-nano's 4 blocks), never a model without
// blocks; a configuration that has none (from a weight file's config, say)
// is refused naming the flag and the minimum.
TEST(Gpt, ZeroLayersIsTheSizesDepthAndAConfigWithoutBlocksIsRefused) {
  ModelOptions o;
  o.name = "gpt-nano";
  o.lm.layers = 0;
  GptConfig g = gpt_config(o);
  EXPECT_EQ(g.layers, 4);
  g.layers = 0;
  try {
    g.validate();
    FAIL() << "a GPT without blocks was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("--layers 0: must be at least 1"),
        std::string::npos)
        << e.what();
  }
}

TEST(Gpt, MapsTokensToNextTokenLogitsAndRefusesALongerSequence) {
  const auto m = make_tiny();
  EXPECT_EQ(m->forward(tokens(3, 12)).sizes(), (at::IntArrayRef{3, 12, 64}));
  EXPECT_EQ(m->forward(tokens(2, 5)).sizes(), (at::IntArrayRef{2, 5, 64}));
  try {
    m->forward(tokens(1, 13));
    FAIL() << "a sequence longer than the context ran";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("longer than the model's context of 12"),
        std::string::npos)
        << e.what();
  }
}

TEST(Gpt, APositionSeesOnlyTheTokensBeforeIt) {
  const auto m = make_tiny();
  m->eval();
  at::Tensor a = tokens(1, 12);
  at::Tensor b = a.clone();
  b[0][7] = (a[0][7].item<std::int64_t>() + 1) % 50;
  const at::Tensor la = m->forward(a);
  const at::Tensor lb = m->forward(b);
  EXPECT_TRUE(at::equal(la.narrow(1, 0, 7), lb.narrow(1, 0, 7)));
  EXPECT_FALSE(at::allclose(la.narrow(1, 7, 5), lb.narrow(1, 7, 5)));
}

TEST(Gpt, TheKvCacheGivesTheFullForwardsLogits) {
  const auto m = make_tiny();
  m->eval();
  at::NoGradGuard no_grad;
  const at::Tensor x = tokens(2, 12);
  const at::Tensor full = m->forward(x);
  // A 5-token prompt, then 2 tokens at once (the masked path), then one at
  // a time.
  KvCache cache = m->new_cache(2);
  std::vector<at::Tensor> parts = {m->forward(x.narrow(1, 0, 5), cache)};
  parts.push_back(m->forward(x.narrow(1, 5, 2), cache));
  for (std::int64_t i = 7; i < 12; ++i) {
    parts.push_back(m->forward(x.narrow(1, i, 1), cache));
  }
  EXPECT_EQ(cache.length, 12);
  // Tolerance: fp32, a different reduction order in attention.
  EXPECT_TRUE(at::allclose(at::cat(parts, 1), full, 1e-5, 1e-5));
  EXPECT_THROW(m->forward(x.narrow(1, 0, 1), cache), UsageError);
  KvCache none; // not made by new_cache: refused, not read out of bounds
  EXPECT_THROW(m->forward(x.narrow(1, 0, 1), none), UsageError);
  KvCache one = m->new_cache(1); // another batch size
  EXPECT_THROW(m->forward(x.narrow(1, 0, 1), one), UsageError);
}

TEST(Gpt, CachedAndUncachedGenerationGiveTheSameTokens) {
  const auto m = make_tiny();
  const std::vector<std::int64_t> prompt = {3, 1, 4};
  for (const double temperature : {0.0, 1.0}) {
    GenerateOptions o;
    o.tokens = 20; // past the context of 12: the window slides
    o.temperature = temperature;
    o.top_k = 10;
    o.seed = 9;
    const auto cached = generate(*m, prompt, o);
    o.use_cache = false;
    const auto uncached = generate(*m, prompt, o);
    EXPECT_EQ(cached, uncached) << "temperature " << temperature;
    ASSERT_EQ(cached.size(), 20u);
    for (const auto t : cached) {
      EXPECT_LT(t, 50); // never a padded id
    }
  }
  GenerateOptions o;
  EXPECT_THROW(generate(*m, {}, o), UsageError);
  EXPECT_THROW(generate(*m, {50}, o), UsageError);
}

TEST(Gpt, GenerationEndsAtAStopToken) {
  const auto m = make_tiny();
  GenerateOptions o;
  o.tokens = 20;
  o.temperature = 0;
  const std::vector<std::int64_t> all = generate(*m, {3, 1, 4}, o);
  // The fifth token as the end: the output stops there, with it.
  o.stop = {all[4]};
  const auto first = std::find(all.begin(), all.end(), all[4]);
  const std::vector<std::int64_t> want(all.begin(), first + 1);
  EXPECT_EQ(generate(*m, {3, 1, 4}, o), want);
}

TEST(Gpt, CheckpointedBlocksGiveTheSameGradients) {
  const at::Tensor x = tokens(2, 12);
  const at::Tensor y = tokens(2, 12, 2);
  auto grads = [&](bool recompute) {
    const auto m = make_tiny(4);
    m->set_checkpointing(
        recompute ? Checkpointing::Blocks : Checkpointing::None);
    const at::Tensor logits = m->forward(x);
    // Each block is a recompute node when checkpointed, none otherwise (the
    // gradients alone would be the same if checkpointing did nothing).
    EXPECT_EQ(
        test::count_graph_nodes(logits, "Recompute"),
        recompute ? static_cast<std::size_t>(m->config().layers) : 0u);
    at::cross_entropy_loss(logits.reshape({-1, 64}), y.reshape({-1}))
        .backward();
    std::vector<at::Tensor> g;
    for (const auto& p : m->parameters()) {
      g.push_back(p.grad().clone());
    }
    return g;
  };
  const auto plain = grads(false);
  const auto recomputed = grads(true);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    // The same ops again: equal to fp32 rounding.
    EXPECT_TRUE(at::allclose(plain[i], recomputed[i], 1e-6, 1e-7)) << i;
  }
}

TEST(Gpt, WeightDecayAppliesToMatricesButNotPositionsBiasesOrNorms) {
  const auto m = make_tiny();
  std::vector<std::string> decayed;
  for (const auto& p : m->named_parameters()) {
    if (m->decays(p.key(), p.value())) {
      decayed.push_back(p.key());
    }
  }
  EXPECT_EQ(decayed.size(), 1u + 2 * 4u); // wte and each block's 4 matrices
  for (const auto& name : decayed) {
    EXPECT_TRUE(name.ends_with(".weight")) << name;
    EXPECT_EQ(name.find("ln_"), std::string::npos) << name;
    EXPECT_NE(name, "transformer.wpe.weight");
  }
}

} // namespace
} // namespace hotloop::model
