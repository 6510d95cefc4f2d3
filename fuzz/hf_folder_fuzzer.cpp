// libFuzzer target for the JSON files of a Hugging Face model folder from a
// hub: each input, parsed as JSON (depth-checked, core/json_depth.h), is
// read as config.json by the GPT-2 and every Llama-family reader
// (model/lm/hf_configs.h), as a sharded checkpoint's index
// (model/lm/weight_index.h) and as a PEFT adapter_config.json
// (model/lm/peft_config.h). Each must give a config, a list of shards or an
// Error naming the file; never a crash, a stack overflow, an overflow in the
// sizes derived from a config (UBSan) or a huge allocation. What they return
// keeps their limits: sizes inside the bounds and valid, shard names plain
// files of the folder and not too many, a rank of at least 1. Built and run
// by fuzz/run, seeded with fuzz/seeds/hf_folder (real models' files).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hotloop/core/json_depth.h"
#include "hotloop/errors.h"
#include "hotloop/model/lm/hf_configs.h"
#include "hotloop/model/lm/peft_config.h"
#include "hotloop/model/lm/weight_index.h"

namespace {

namespace lm = hotloop::model::lm;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

template <typename Config>
void check_sizes(const Config& c) {
  check(c.layers >= 1 && c.layers <= lm::kMaxLayers);
  check(c.heads >= 1 && c.heads <= lm::kMaxHeads);
  check(c.width >= 1 && c.width <= lm::kMaxWidth);
  check(c.vocab >= 2 && c.vocab <= lm::kMaxVocabulary);
  check(c.non_embedding_parameters() > 0);
  check(std::isfinite(c.training_flops_per_token()));
  c.validate(); // a config a reader returns is one a model can be built of
}

void read_configs(const nlohmann::json& j) {
  try {
    check_sizes(lm::read_gpt2_config(j, 0, "config.json"));
  } catch (const hotloop::Error&) {
  }
  for (const auto& a : lm::kLlamaArchitectures) {
    try {
      const auto c = lm::read_llama_config(j, a.name, 0, "config.json");
      check_sizes(c);
      check(c.kv_heads >= 1 && c.heads % c.kv_heads == 0);
      check(c.context >= 1 && c.context <= c.max_positions);
    } catch (const hotloop::Error&) {
    }
  }
}

void read_index(const nlohmann::json& j) {
  try {
    const auto shards =
        hotloop::model::index_shards(j, "model.safetensors.index.json");
    check(!shards.empty() && shards.size() <= hotloop::model::kMaxWeightShards);
    for (const std::string& s : shards) {
      check(
          !s.empty() && s != "." && s != ".." &&
          s.find('/') == std::string::npos);
    }
  } catch (const hotloop::Error&) {
  }
}

void read_adapter(const nlohmann::json& j) {
  try {
    const auto c = hotloop::model::read_peft_config(j, "adapter_config.json");
    check(c.options.rank >= 1);
    check(c.options.dropout >= 0 && c.options.dropout < 1);
  } catch (const hotloop::Error&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  nlohmann::json j;
  try {
    j = hotloop::parse_json(
        std::string_view(reinterpret_cast<const char*>(data), size),
        "fuzz.json");
  } catch (const hotloop::DataError&) {
    return 0;
  }
  read_configs(j);
  read_index(j);
  read_adapter(j);
  return 0;
}
