// The Llama family: Hugging Face's names and shapes (grouped-query attention,
// tied or untied output, biases where the config has them), causality, the KV
// cache against the full forward, activation checkpointing's gradients, which
// parameters decay, the named sizes and what is refused. Logits against
// transformers: tests/model/llama_hf.py.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/generate.h"
#include "hotloop/model/lm/language_model.h"
#include "support/autograd_graph.h"

namespace hotloop::model {
namespace {

LlamaConfig tiny() {
  LlamaConfig c;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.width = 32;
  c.intermediate = 64;
  c.context = 12;
  c.max_positions = 12;
  c.vocab = 50;
  c.tied = false;
  return c;
}

std::shared_ptr<Llama> make_tiny(
    std::uint64_t seed = 0,
    LlamaConfig c = tiny()) {
  torch::manual_seed(seed);
  return std::make_shared<Llama>(c);
}

at::Tensor tokens(std::int64_t b, std::int64_t t, std::uint64_t seed = 1) {
  at::manual_seed(seed);
  return at::randint(50, {b, t}, at::kLong);
}

std::map<std::string, std::vector<std::int64_t>> shapes(const Llama& m) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& p : m.named_parameters()) {
    out[p.key()] = p.value().sizes().vec();
  }
  return out;
}

using V = std::vector<std::int64_t>;

TEST(Llama, ParametersHaveHuggingFaceNamesAndGroupedQueryShapes) {
  const auto s = shapes(*make_tiny());
  EXPECT_EQ(s.at("model.embed_tokens.weight"), (V{50, 32}));
  EXPECT_EQ(s.at("model.layers.1.input_layernorm.weight"), (V{32}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.q_proj.weight"), (V{32, 32}));
  // 2 key/value heads of width 8 for 4 query heads.
  EXPECT_EQ(s.at("model.layers.0.self_attn.k_proj.weight"), (V{16, 32}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.v_proj.weight"), (V{16, 32}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.o_proj.weight"), (V{32, 32}));
  EXPECT_EQ(s.at("model.layers.0.mlp.gate_proj.weight"), (V{64, 32}));
  EXPECT_EQ(s.at("model.layers.0.mlp.up_proj.weight"), (V{64, 32}));
  EXPECT_EQ(s.at("model.layers.0.mlp.down_proj.weight"), (V{32, 64}));
  EXPECT_EQ(s.at("model.layers.0.post_attention_layernorm.weight"), (V{32}));
  EXPECT_EQ(s.at("model.norm.weight"), (V{32}));
  EXPECT_EQ(s.at("lm_head.weight"), (V{50, 32}));
  EXPECT_FALSE(s.contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_EQ(s.size(), 1u + 2 * 9u + 1u + 1u);

  // Qwen2's biases on q, k, v (not o); a tied output has no lm_head.
  LlamaConfig q = tiny();
  q.qkv_bias = true;
  q.tied = true;
  const auto qs = shapes(*make_tiny(0, q));
  EXPECT_EQ(qs.at("model.layers.0.self_attn.k_proj.bias"), (V{16}));
  EXPECT_FALSE(qs.contains("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(qs.contains("lm_head.weight"));
}

TEST(Llama, MapsTokensToLogitsAndAPositionSeesOnlyTheTokensBeforeIt) {
  const auto m = make_tiny();
  m->eval();
  EXPECT_EQ(m->forward(tokens(3, 12)).sizes(), (at::IntArrayRef{3, 12, 50}));
  EXPECT_THROW(m->forward(tokens(1, 13)), UsageError);
  at::Tensor a = tokens(1, 12);
  at::Tensor b = a.clone();
  b[0][7] = (a[0][7].item<std::int64_t>() + 1) % 50;
  const at::Tensor la = m->forward(a);
  const at::Tensor lb = m->forward(b);
  EXPECT_TRUE(at::equal(la.narrow(1, 0, 7), lb.narrow(1, 0, 7)));
  EXPECT_FALSE(at::allclose(la.narrow(1, 7, 5), lb.narrow(1, 7, 5)));
}

TEST(Llama, PositionsMatterThroughTheRotaryEmbedding) {
  // No position table: only RoPE tells positions apart. The same two tokens
  // swapped give another logit at the second position.
  const auto m = make_tiny();
  m->eval();
  at::NoGradGuard no_grad;
  const at::Tensor ab = at::tensor({3, 5, 3}, at::kLong).view({1, 3});
  const at::Tensor ba = at::tensor({5, 3, 3}, at::kLong).view({1, 3});
  EXPECT_FALSE(at::allclose(
      m->forward(ab).select(1, 2), m->forward(ba).select(1, 2), 1e-4, 1e-5));
}

TEST(Llama, TheKvCacheGivesTheFullForwardsLogits) {
  const auto m = make_tiny();
  m->eval();
  at::NoGradGuard no_grad;
  const at::Tensor x = tokens(2, 12);
  const at::Tensor full = m->forward(x);
  KvCache cache = m->new_cache(2);
  ASSERT_EQ(cache.keys.front().size(1), 2); // the key/value heads only
  std::vector<at::Tensor> parts = {m->forward(x.narrow(1, 0, 5), cache)};
  parts.push_back(m->forward(x.narrow(1, 5, 2), cache));
  for (std::int64_t i = 7; i < 12; ++i) {
    parts.push_back(m->forward(x.narrow(1, i, 1), cache));
  }
  EXPECT_EQ(cache.length, 12);
  // Tolerance: fp32, a different reduction order in attention.
  EXPECT_TRUE(at::allclose(at::cat(parts, 1), full, 1e-5, 1e-5));
  EXPECT_THROW(m->forward(x.narrow(1, 0, 1), cache), UsageError);
  KvCache one = m->new_cache(1);
  EXPECT_THROW(m->forward(x.narrow(1, 0, 1), one), UsageError);
}

TEST(Llama, CachedAndUncachedGenerationGiveTheSameTokens) {
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
    EXPECT_EQ(cached, generate(*m, prompt, o)) << "temperature " << temperature;
    ASSERT_EQ(cached.size(), 20u);
  }
}

TEST(Llama, CheckpointedBlocksGiveTheSameGradients) {
  const at::Tensor x = tokens(2, 12);
  const at::Tensor y = tokens(2, 12, 2);
  auto grads = [&](bool recompute) {
    const auto m = make_tiny(4);
    m->set_checkpointing(
        recompute ? Checkpointing::Blocks : Checkpointing::None);
    const at::Tensor logits = m->forward(x);
    EXPECT_EQ(
        test::count_graph_nodes(logits, "Recompute"), recompute ? 2u : 0u);
    m->loss(logits, y, {}).backward();
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
    EXPECT_TRUE(at::allclose(plain[i], recomputed[i], 1e-6, 1e-7)) << i;
  }
}

TEST(Llama, WeightDecayAppliesToMatricesButNotNormsOrATiedEmbedding) {
  auto decayed = [](const Llama& m) {
    std::vector<std::string> out;
    for (const auto& p : m.named_parameters()) {
      if (m.decays(p.key(), p.value())) {
        out.push_back(p.key());
      }
    }
    return out;
  };
  // Untied: the embedding, lm_head and each block's 7 matrices.
  const auto untied = decayed(*make_tiny());
  EXPECT_EQ(untied.size(), 2u + 2 * 7u);
  for (const auto& name : untied) {
    EXPECT_EQ(name.find("norm"), std::string::npos) << name;
  }
  LlamaConfig c = tiny();
  c.tied = true;
  EXPECT_EQ(decayed(*make_tiny(0, c)).size(), 2 * 7u);
}

TEST(Llama, NamedSizesAndFlagsMakeTheConfiguration) {
  ModelOptions o;
  o.name = "llama-nano";
  o.lm.vocab = 300;
  LlamaConfig c = llama_config(o);
  EXPECT_EQ(c.layers, 4);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.width, 128);
  EXPECT_EQ(c.vocab, 300);
  EXPECT_TRUE(c.tied);
  // A new width keeps the MLP at 8/3 of it (rounded up to 32); 6 heads share
  // the size's 2 key/value heads.
  o.lm.width = 96;
  o.lm.heads = 6;
  c = llama_config(o);
  EXPECT_EQ(c.intermediate, 256);
  EXPECT_EQ(c.kv_heads, 2);
  o.lm.heads = 3; // 2 does not divide 3: one key/value head per head
  EXPECT_EQ(llama_config(o).kv_heads, 3);

  // Qwen2.5-0.5B's shape: its published 494,032,768 parameters (tied, so
  // the embedding counted once, as the output).
  o = ModelOptions();
  o.name = "qwen2.5-0.5b";
  c = llama_config(o);
  EXPECT_EQ(c.non_embedding_parameters(), 494032768);
  EXPECT_EQ(c.context, 1024);
  EXPECT_TRUE(c.qkv_bias);
  o.lm.context = 40000; // past its 32768 positions
  EXPECT_THROW(llama_config(o), UsageError);
}

TEST(Llama, AConfigThatDoesNotHoldTogetherIsRefused) {
  LlamaConfig c = tiny();
  c.kv_heads = 3; // 4 heads cannot share 3
  EXPECT_THROW(c.validate(), UsageError);
  c = tiny();
  c.width = 36;
  c.heads = 4; // head width 9: odd, RoPE rotates pairs
  c.kv_heads = 4;
  EXPECT_THROW(c.validate(), UsageError);
}

} // namespace
} // namespace hotloop::model
