// LoRA on the language models: adapters start as the identity update and
// freeze the base, only the adapters get gradients, merging gives the adapted
// model's outputs in a plain one (Linear and GPT-2's Conv1D layouts), PEFT's
// folder round trips, a bf16 base halves the frozen projections, the FLOP
// count drops the frozen weight gradients, and what is
// refused says why. Against peft itself: tests/model/lora_peft.py.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/lora.h"
#include "support/temp_dir.h"

namespace hotloop::model {
namespace {

std::shared_ptr<Llama> tiny_llama() {
  LlamaConfig c;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.width = 32;
  c.intermediate = 64;
  c.context = 12;
  c.max_positions = 12;
  c.vocab = 50;
  c.qkv_bias = true;
  at::manual_seed(0);
  return std::make_shared<Llama>(c);
}

std::shared_ptr<Gpt> tiny_gpt() {
  at::manual_seed(0);
  return std::make_shared<Gpt>(GptConfig{2, 4, 32, 12, 50});
}

at::Tensor tokens() {
  at::manual_seed(1);
  return at::randint(0, 50, {2, 12}, at::kLong);
}

// B random instead of zero: an adapter that changes the output.
void perturb_adapters(LanguageModel& m) {
  at::NoGradGuard no_grad;
  for (auto& [name, t] : lora_state(m)) {
    t.normal_(0, 0.1);
  }
}

LoraOptions rank(std::int64_t r, std::vector<std::string> targets = {}) {
  LoraOptions o;
  o.rank = r;
  o.alpha = 8;
  o.targets = std::move(targets);
  return o;
}

TEST(Lora, AdaptersStartAsTheBaseModelAndOnlyTheyTrain) {
  auto m = tiny_llama();
  m->eval();
  const at::Tensor before = m->forward(tokens());
  const auto adapted = add_lora(*m, rank(4, {"q_proj", "v_proj"}));
  EXPECT_EQ(adapted.size(), 4u); // two layers, two projections each
  EXPECT_TRUE(at::equal(m->forward(tokens()), before));
  std::set<std::string> trainable;
  for (const auto& p : m->named_parameters()) {
    if (p.value().requires_grad()) {
      trainable.insert(p.key());
    }
  }
  EXPECT_EQ(trainable.size(), 8u);
  EXPECT_TRUE(
      trainable.contains("model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_TRUE(
      trainable.contains("model.layers.1.self_attn.v_proj.lora_B.weight"));
  m->train();
  m->forward(tokens()).sum().backward();
  for (const auto& p : m->named_parameters()) {
    EXPECT_EQ(p.value().grad().defined(), p.value().requires_grad()) << p.key();
  }
  // B starts at zero, so A's gradient is zero and B's is not.
  // A copy: named_parameters() returns a new dict, gone after this line.
  const at::Tensor b =
      m->named_parameters()["model.layers.0.self_attn.q_proj.lora_B.weight"];
  EXPECT_GT(b.grad().abs().sum().item<double>(), 0);
}

TEST(Lora, MergingGivesTheAdaptedOutputsInAPlainModel) {
  for (int which = 0; which < 2; ++which) {
    std::shared_ptr<LanguageModel> m;
    if (which == 0) {
      m = tiny_llama();
    } else {
      m = tiny_gpt();
    }
    m->eval();
    const at::Tensor base = m->forward(tokens());
    add_lora(*m, rank(4));
    perturb_adapters(*m);
    const at::Tensor adapted = m->forward(tokens());
    ASSERT_GT((adapted - base).abs().max().item<double>(), 1e-3) << which;
    EXPECT_EQ(merge_lora(*m), which == 0 ? 14u : 8u);
    EXPECT_TRUE(lora_state(*m).empty());
    const at::Tensor merged = m->forward(tokens());
    // Float32: the merged product's rounding differs from two matmuls'.
    const double rel =
        ((merged - adapted).norm() / adapted.norm()).item<double>();
    EXPECT_LT(rel, 1e-5) << (which == 0 ? "llama" : "gpt (Conv1D layout)");
  }
}

TEST(Lora, PeftFolderRoundTripsTheAdapters) {
  test::TempDir dir;
  auto m = tiny_gpt();
  const LoraOptions o = rank(2, {"c_attn"});
  add_lora(*m, o);
  perturb_adapters(*m);
  write_peft_adapter(dir.path().string(), *m, o, "/base", true);
  std::ifstream in(std::filesystem::path(dir.path()) / "adapter_config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["r"], 2);
  EXPECT_EQ(j["fan_in_fan_out"], true);
  EXPECT_EQ(j["target_modules"], nlohmann::json({"c_attn"}));
  const PeftAdapter a = read_peft_adapter(dir.path().string());
  EXPECT_EQ(a.base, "/base");
  EXPECT_EQ(a.options.rank, 2);
  EXPECT_EQ(a.options.alpha, 8);
  const StateDict saved = lora_state(*m);
  ASSERT_EQ(a.weights.size(), saved.size());
  auto fresh = tiny_gpt();
  add_lora(*fresh, a.options);
  load_lora_weights(*fresh, a.weights, dir.path().string());
  const StateDict loaded = lora_state(*fresh);
  for (std::size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(loaded[i].first, saved[i].first);
    EXPECT_TRUE(at::equal(loaded[i].second, saved[i].second)) << saved[i].first;
  }
  // PEFT's folder for a model built from a config has no base: null.
  const auto config = std::filesystem::path(dir.path()) / "adapter_config.json";
  nlohmann::json nulled = j;
  nulled["base_model_name_or_path"] = nullptr;
  std::ofstream(config) << nulled.dump();
  EXPECT_EQ(read_peft_adapter(dir.path().string()).base, "");
  // Into a model adapted elsewhere: named, not loaded.
  auto other = tiny_gpt();
  add_lora(*other, rank(2, {"c_fc"}));
  EXPECT_THROW(
      load_lora_weights(*other, a.weights, dir.path().string()), DataError);
}

TEST(Lora, RefusesWhatItCannotDo) {
  auto m = tiny_llama();
  try {
    add_lora(*m, rank(4, {"qkv"}));
    FAIL() << "an unknown target was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'qkv'"), std::string::npos);
    EXPECT_NE(e.hint().find("q_proj"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(add_lora(*tiny_llama(), rank(40)), UsageError);
  // A PEFT adapter hotloop cannot apply: DoRA.
  test::TempDir dir;
  auto g = tiny_gpt();
  add_lora(*g, rank(2));
  write_peft_adapter(dir.path().string(), *g, rank(2), "/base", true);
  const auto config = std::filesystem::path(dir.path()) / "adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(config));
  j["use_dora"] = true;
  std::ofstream(config) << j.dump();
  EXPECT_THROW(read_peft_adapter(dir.path().string()), ConfigError);
}

TEST(Lora, ABf16BaseHalvesTheFrozenProjectionsAndKeepsFloat32Adapters) {
  auto m = tiny_llama();
  add_lora(*m, rank(4));
  std::size_t projections = 0;
  for (const auto& p : m->named_parameters()) {
    if (p.key().find("proj.weight") != std::string::npos ||
        p.key().find("proj.bias") != std::string::npos) {
      projections += p.value().nbytes();
    }
  }
  EXPECT_EQ(store_frozen_projections(*m, at::kBFloat16), projections / 2);
  for (const auto& p : m->named_parameters()) {
    const bool adapter = p.key().find("lora_") != std::string::npos;
    const bool projection =
        !adapter && p.key().find("_proj.") != std::string::npos;
    EXPECT_EQ(p.value().scalar_type(), projection ? at::kBFloat16 : at::kFloat)
        << p.key();
  }
}

TEST(Lora, TrainingFlopsDropTheFrozenWeightGradients) {
  auto m = tiny_llama(); // tied: the embedding is the output layer
  ASSERT_TRUE(m->config().tied);
  add_lora(*m, rank(4));
  double frozen = 0;
  double adapters = 0;
  for (const auto& p : m->named_parameters()) {
    const bool projection = p.key().ends_with("_proj.weight");
    if (projection || p.key() == "model.embed_tokens.weight") {
      frozen += static_cast<double>(p.value().numel());
    } else if (p.key().find(".lora_") != std::string::npos) {
      adapters += static_cast<double>(p.value().numel());
    }
  }
  EXPECT_DOUBLE_EQ(lora_flops_per_token_change(*m), 6 * adapters - 2 * frozen);
}

} // namespace
} // namespace hotloop::model
