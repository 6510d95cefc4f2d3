// Limits no file can talk past (core/json_depth.h, model/lm/hf_adapters.h,
// model/lm/weight_index.h, model/lm/peft_config.h): JSON nested past any
// real file is an error naming the file at each reader of outside JSON (a
// model folder's config.json and tokenizer.json; Instructions.* has an
// instruction line's), not a stack overflow; a config.json's sizes are
// checked before a model is built from them; a shard index names files of
// its folder only, and not too many; an adapter's dropout is a probability.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/peft_config.h"
#include "hotloop/model/lm/weight_index.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

// 100 000 levels: past what nlohmann's recursive parser survives on an
// 8 MiB stack (it parses 50 000).
const std::string kDeep = std::string(100000, '[') + std::string(100000, ']');

void expect_error_containing(
    const std::function<void()>& f,
    const std::string& text) {
  try {
    f();
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(JsonDepth, CountsArraysAndObjectsButNotBracketsInStrings) {
  EXPECT_EQ(json_depth("{}"), 1u);
  EXPECT_EQ(json_depth(R"({"a": [1, {"b": []}]})"), 4u);
  EXPECT_EQ(json_depth(R"({"a": "[[[[\"[[[", "b": [[]]})"), 3u);
  EXPECT_EQ(json_depth("42"), 0u);
  EXPECT_EQ(json_depth(kDeep), kMaxJsonDepth + 1); // stops counting there
  EXPECT_NO_THROW(check_json_depth(std::string(512, '['), "x"));
  EXPECT_THROW(check_json_depth(std::string(513, '['), "x"), DataError);
}

TEST(JsonDepth, ADeepConfigJsonIsAnErrorNamingTheFile) {
  test::TempDir dir;
  dir.write("model/config.json", kDeep);
  expect_error_containing(
      [&] { model::read_hf_config((dir.path() / "model").string()); },
      "config.json: JSON nested more than 512 levels deep");
}

TEST(JsonDepth, ADeepTokenizerJsonIsAnErrorNamingTheFile) {
  test::TempDir dir;
  dir.write("tokenizer.json", kDeep);
  expect_error_containing(
      [&] { data::Tokenizer::hf((dir.path() / "tokenizer.json").string()); },
      "tokenizer.json: JSON nested more than 512 levels deep");
}

TEST(ConfigSizes, AVocabularyOfAHundredBillionIsRefusedNamingTheField) {
  test::TempDir dir;
  dir.write(
      "model/config.json",
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 100000000000})");
  expect_error_containing(
      [&] { model::read_hf_config((dir.path() / "model").string()); },
      "\"vocab_size\" is 100000000000, outside 1 to 16777216");
}

TEST(ConfigSizes, ANegativeWidthOfAGpt2IsRefusedNamingTheField) {
  test::TempDir dir;
  dir.write(
      "model/config.json",
      R"({"architectures": ["GPT2LMHeadModel"], "n_embd": -64})");
  expect_error_containing(
      [&] { model::read_hf_config((dir.path() / "model").string()); },
      "\"n_embd\" is -64");
}

TEST(ConfigSizes, ANumberPastAnIntegersRangeOrNotWholeIsRefusedNamingTheField) {
  // 1e107 (as the fuzzer wrote it: a hundred digits) cannot become an
  // int64 (converting it is undefined behaviour); 2.5 heads is no count.
  // A whole number written as a float (2.0) reads as one.
  const auto config = [](const std::string& heads) {
    return R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 256, "num_key_value_heads": )" +
        heads + "}";
  };
  test::TempDir dir;
  dir.write("model/config.json", config(std::string(100, '9') + "7"));
  expect_error_containing(
      [&] { model::read_hf_config((dir.path() / "model").string()); },
      "\"num_key_value_heads\" is 1e+101, not a whole number");
  dir.write("model/config.json", config("2.5"));
  expect_error_containing(
      [&] { model::read_hf_config((dir.path() / "model").string()); },
      "\"num_key_value_heads\" is 2.5, not a whole number");
  dir.write("model/config.json", config("2.0"));
  EXPECT_NO_THROW(model::read_hf_config((dir.path() / "model").string()));
}

TEST(PeftConfig, ARankPastAnIntegersRangeIsRefusedNamingTheFile) {
  const nlohmann::json j = {
      {"peft_type", "LORA"},
      {"r", 1e107},
      {"lora_alpha", 8},
      {"target_modules", {"q_proj"}}};
  expect_error_containing(
      [&] { model::read_peft_config(j, "adapter_config.json"); },
      "adapter_config.json: \"r\" is 1e+107, not a whole number");
}

TEST(WeightIndex, ShardsOutsideTheFolderOrPastTheCountAreRefused) {
  const std::string file = "model.safetensors.index.json";
  auto index = [](const nlohmann::json& map) {
    return nlohmann::json{
        {"metadata", {{"total_size", 8}}}, {"weight_map", map}};
  };
  EXPECT_EQ(
      model::index_shards(
          index(
              {{"a", "model-00002-of-00002.safetensors"},
               {"b", "model-00001-of-00002.safetensors"},
               {"c", "model-00001-of-00002.safetensors"}}),
          file),
      (std::vector<std::string>{
          "model-00001-of-00002.safetensors",
          "model-00002-of-00002.safetensors"}));
  for (const char* outside :
       {"../other/model.safetensors",
        "/etc/passwd",
        "..",
        "",
        "sub/x.safetensors"}) {
    expect_error_containing(
        [&] {
          model::index_shards(index({{"w", outside}}), file);
        },
        "not the name of a file in the folder");
  }
  nlohmann::json many = nlohmann::json::object();
  for (std::size_t i = 0; i <= model::kMaxWeightShards; ++i) {
    many[fmt::format("w{}", i)] = fmt::format("shard-{}", i);
  }
  expect_error_containing(
      [&] { model::index_shards(index(many), file); },
      "names more than 4096 shard files");
}

TEST(PeftConfig, ADropoutThatIsNoProbabilityIsRefusedNamingTheFile) {
  nlohmann::json j = {
      {"peft_type", "LORA"},
      {"r", 4},
      {"lora_alpha", 8},
      {"target_modules", {"q_proj"}},
      {"lora_dropout", 0.1}};
  EXPECT_EQ(model::read_peft_config(j, "adapter_config.json").options.rank, 4);
  j["lora_dropout"] = 5;
  expect_error_containing(
      [&] { model::read_peft_config(j, "adapter_config.json"); },
      "adapter_config.json: lora_dropout 5 is not a probability");
}

} // namespace
} // namespace hotloop
