#include "hotloop/model/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "json_file.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  return read_json_object(
      path,
      "a Hugging Face model folder has the config.json save_pretrained writes");
}

// A config field: its value, or `fallback` when it is absent or null; a
// DataError naming the field when it has the wrong type.
template <typename T>
T field(const json& j, const char* key, T fallback, const fs::path& file) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw DataError(fmt::format(
        "{}: \"{}\" is {}, not the {} expected",
        file.string(),
        key,
        it->dump(),
        std::is_same_v<T, bool> ? "true/false" : "number"));
  }
}

std::optional<std::int64_t> token_id(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) {
    return std::nullopt;
  }
  if (it->is_number_integer()) {
    return it->get<std::int64_t>();
  }
  if (it->is_array() && !it->empty() && it->front().is_number_integer()) {
    return it->front().get<std::int64_t>(); // several EOS ids: the first
  }
  return std::nullopt;
}

[[noreturn]] void refuse(
    const fs::path& file,
    const std::string& what,
    const std::string& hint) {
  throw UsageError(
      fmt::format("{}: {}: hotloop does not run this", file.string(), what),
      hint);
}

RopeOptions read_rope(const json& j, const fs::path& file) {
  RopeOptions r;
  // transformers 5 writes "rope_parameters" (theta inside); 4.x
  // "rope_theta" and "rope_scaling".
  const json* scaling = nullptr;
  if (const auto p = j.find("rope_parameters");
      p != j.end() && p->is_object()) {
    scaling = &*p;
    r.theta = field(*p, "rope_theta", r.theta, file);
  }
  r.theta = field(j, "rope_theta", r.theta, file);
  if (const auto s = j.find("rope_scaling"); s != j.end() && s->is_object()) {
    scaling = &*s;
  }
  if (scaling == nullptr) {
    return r;
  }
  std::string type = field<std::string>(*scaling, "rope_type", "", file);
  if (type.empty()) {
    type = field<std::string>(*scaling, "type", "default", file);
  }
  if (type == "default") {
    return r;
  }
  if (type != "linear" && type != "llama3") {
    refuse(
        file,
        fmt::format("RoPE scaling \"{}\"", type),
        "hotloop's RoPE takes no scaling, linear or llama3");
  }
  r.type = parse_named<RopeType>(kRopeTypeNames, type, "rope_type");
  r.factor = field(*scaling, "factor", 1.0, file);
  r.low_freq_factor = field(*scaling, "low_freq_factor", 1.0, file);
  r.high_freq_factor = field(*scaling, "high_freq_factor", 4.0, file);
  r.original_context = field<std::int64_t>(
      *scaling, "original_max_position_embeddings", 8192, file);
  return r;
}

LlamaConfig read_llama(
    const json& j,
    const std::string& architecture,
    std::int64_t context,
    const fs::path& file) {
  LlamaConfig c;
  c.family = architecture == "Qwen2ForCausalLM"
      ? LlamaFamily::Qwen2
      : (architecture == "MistralForCausalLM" ? LlamaFamily::Mistral
                                              : LlamaFamily::Llama);
  for (const char* key :
       {"num_local_experts", "num_experts", "moe_intermediate_size"}) {
    if (j.contains(key) && !j[key].is_null()) {
      refuse(
          file,
          fmt::format("a mixture of experts (\"{}\")", key),
          "hotloop runs dense Llama-family models");
    }
  }
  const std::string act = field<std::string>(j, "hidden_act", "silu", file);
  if (act != "silu") {
    refuse(
        file,
        fmt::format("hidden_act \"{}\"", act),
        "the Llama family's MLP is SwiGLU (silu)");
  }
  c.layers = field<std::int64_t>(j, "num_hidden_layers", 0, file);
  c.heads = field<std::int64_t>(j, "num_attention_heads", 0, file);
  c.kv_heads = field<std::int64_t>(j, "num_key_value_heads", c.heads, file);
  c.width = field<std::int64_t>(j, "hidden_size", 0, file);
  c.head_width = field<std::int64_t>(j, "head_dim", 0, file);
  c.intermediate = field<std::int64_t>(j, "intermediate_size", 0, file);
  c.max_positions =
      field<std::int64_t>(j, "max_position_embeddings", 2048, file);
  c.vocab = field<std::int64_t>(j, "vocab_size", 0, file);
  c.rms_eps = field(j, "rms_norm_eps", 1e-6, file);
  c.init_std = field(j, "initializer_range", 0.02, file);
  c.rope = read_rope(j, file);
  c.tied =
      field(j, "tie_word_embeddings", false, file); // transformers' default
  if (c.family == LlamaFamily::Qwen2) {
    c.qkv_bias = true; // Qwen2's attention: biases on q, k, v
  } else {
    c.qkv_bias = c.o_bias = field(j, "attention_bias", false, file);
  }
  c.mlp_bias = field(j, "mlp_bias", false, file);
  c.bos = token_id(j, "bos_token_id");
  c.eos = token_id(j, "eos_token_id");
  c.context =
      context > 0 ? context : std::min<std::int64_t>(c.max_positions, 1024);
  // Sliding-window attention: the same model while the window covers the
  // whole context.
  std::int64_t window = 0;
  if (c.family == LlamaFamily::Mistral ||
      field(j, "use_sliding_window", false, file)) {
    window = field<std::int64_t>(j, "sliding_window", 0, file);
  }
  if (const auto types = j.find("layer_types");
      types != j.end() && types->is_array()) {
    for (const auto& t : *types) {
      if (t.is_string() && t.get<std::string>() != "full_attention" &&
          window == 0) {
        refuse(
            file,
            fmt::format("layer type \"{}\"", t.get<std::string>()),
            "hotloop's attention is full causal attention");
      }
    }
  }
  if (window > 0 && c.context > window) {
    refuse(
        file,
        fmt::format(
            "sliding-window attention of {} tokens, shorter than the context of {}",
            window,
            c.context),
        fmt::format(
            "pass --context {} or less: inside the window it is full attention",
            window));
  }
  c.validate();
  return c;
}

GptConfig read_gpt2(const json& j, std::int64_t context, const fs::path& file) {
  GptConfig c;
  c.layers = field<std::int64_t>(j, "n_layer", 12, file);
  c.heads = field<std::int64_t>(j, "n_head", 12, file);
  c.width = field<std::int64_t>(j, "n_embd", 768, file);
  c.context = field<std::int64_t>(j, "n_positions", 1024, file);
  c.vocab = field<std::int64_t>(j, "vocab_size", 50257, file);
  const std::string act =
      field<std::string>(j, "activation_function", "gelu_new", file);
  if (act != "gelu_new") {
    refuse(
        file,
        fmt::format("activation_function \"{}\"", act),
        "hotloop's GPT uses GPT-2's tanh GELU (gelu_new)");
  }
  if (j.contains("n_inner") && !j["n_inner"].is_null() &&
      j["n_inner"].get<std::int64_t>() != 4 * c.width) {
    refuse(
        file,
        "an MLP width other than 4 x n_embd",
        "hotloop's GPT has GPT-2's 4x MLP");
  }
  if (context > 0 && context != c.context) {
    throw UsageError(
        fmt::format(
            "--context {}: {} is a GPT-2 with a position table of {}",
            context,
            file.string(),
            c.context),
        "drop --context: the table's size is the model's context");
  }
  c.validate();
  return c;
}

const std::vector<std::string>& architectures() {
  static const std::vector<std::string> a = {
      "LlamaForCausalLM",
      "Qwen2ForCausalLM",
      "MistralForCausalLM",
      "GPT2LMHeadModel"};
  return a;
}

// The weight files of DIR: one file, or an index's shards in order.
std::vector<fs::path> weight_files(const fs::path& dir) {
  for (const char* single : {"model.safetensors", "pytorch_model.bin"}) {
    if (fs::is_regular_file(dir / single)) {
      return {dir / single};
    }
  }
  for (const char* index :
       {"model.safetensors.index.json", "pytorch_model.bin.index.json"}) {
    const fs::path path = dir / index;
    if (!fs::is_regular_file(path)) {
      continue;
    }
    const json j = read_json(path);
    const auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object() || map->empty()) {
      throw DataError(fmt::format(
          "{}: has no \"weight_map\" of tensor names to shard files",
          path.string()));
    }
    std::set<std::string> seen;
    std::vector<fs::path> shards;
    for (const auto& [name, shard] : map->items()) {
      if (!shard.is_string()) {
        throw DataError(fmt::format(
            "{}: \"{}\" maps to {}, not a file name",
            path.string(),
            name,
            shard.dump()));
      }
      if (seen.insert(shard.get<std::string>()).second) {
        shards.push_back(dir / shard.get<std::string>());
      }
    }
    std::sort(shards.begin(), shards.end());
    for (const fs::path& s : shards) {
      if (!fs::is_regular_file(s)) {
        throw DataError(
            fmt::format(
                "{}: shard {} is missing",
                path.string(),
                s.filename().string()),
            "download every file the index names");
      }
    }
    return shards;
  }
  throw DataError(
      fmt::format(
          "{}: no model.safetensors, pytorch_model.bin or sharded index in the folder",
          dir.string()),
      "a Hugging Face model folder holds the files save_pretrained writes");
}

} // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) &&
      fs::is_regular_file(fs::path(path) / "config.json", ec);
}

namespace {

HfModelConfig read_hf_config_json(
    const std::string& dir,
    std::int64_t context) {
  const fs::path file = fs::path(dir) / "config.json";
  const json j = read_json(file);
  std::string architecture;
  if (const auto a = j.find("architectures");
      a != j.end() && a->is_array() && !a->empty() && a->front().is_string()) {
    architecture = a->front().get<std::string>();
  } else {
    // No architectures: the model type says which.
    const std::string type = field<std::string>(j, "model_type", "", file);
    architecture = type == "llama" ? "LlamaForCausalLM"
        : type == "qwen2"          ? "Qwen2ForCausalLM"
        : type == "mistral"        ? "MistralForCausalLM"
        : type == "gpt2"           ? "GPT2LMHeadModel"
                                   : type;
  }
  if (std::find(architectures().begin(), architectures().end(), architecture) ==
      architectures().end()) {
    refuse(
        file,
        fmt::format(
            "architecture \"{}\"",
            architecture.empty() ? "(none named)" : architecture),
        fmt::format("hotloop reads {}", fmt::join(architectures(), ", ")));
  }
  HfModelConfig out;
  out.architecture = architecture;
  out.gpt2 = architecture == "GPT2LMHeadModel";
  if (out.gpt2) {
    out.gpt = read_gpt2(j, context, file);
  } else {
    out.llama = read_llama(j, architecture, context, file);
  }
  return out;
}

} // namespace

HfModelConfig read_hf_config(const std::string& dir, std::int64_t context) {
  try {
    return read_hf_config_json(dir, context);
  } catch (const nlohmann::json::exception& e) {
    // A field of another type than transformers writes.
    throw DataError(fmt::format(
        "{}: {}", (fs::path(dir) / "config.json").string(), e.what()));
  }
}

StateDict read_hf_weights(const std::string& dir) {
  StateDict out;
  for (const fs::path& file : weight_files(dir)) {
    StateDict part = read_weights(file.string());
    std::move(part.begin(), part.end(), std::back_inserter(out));
  }
  return out;
}

std::string hf_llama_config(const LlamaConfig& c) {
  json j;
  const char* architecture = c.family == LlamaFamily::Qwen2
      ? "Qwen2ForCausalLM"
      : (c.family == LlamaFamily::Mistral ? "MistralForCausalLM"
                                          : "LlamaForCausalLM");
  j["architectures"] = {architecture};
  j["model_type"] = name_of<LlamaFamily>(kLlamaFamilyNames, c.family);
  j["vocab_size"] = c.vocab;
  j["hidden_size"] = c.width;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_positions;
  j["initializer_range"] = c.init_std;
  j["rms_norm_eps"] = c.rms_eps;
  j["tie_word_embeddings"] = c.tied;
  j["rope_theta"] = c.rope.theta;
  if (c.rope.type == RopeType::Default) {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {
        {"rope_type", name_of<RopeType>(kRopeTypeNames, c.rope.type)},
        {"factor", c.rope.factor}};
    if (c.rope.type == RopeType::Llama3) {
      j["rope_scaling"]["low_freq_factor"] = c.rope.low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = c.rope.high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] =
          c.rope.original_context;
    }
  }
  if (c.family == LlamaFamily::Llama) {
    j["attention_bias"] = c.qkv_bias;
    j["mlp_bias"] = c.mlp_bias;
  }
  if (c.family == LlamaFamily::Qwen2) {
    j["use_sliding_window"] = false;
  }
  if (c.family == LlamaFamily::Mistral) {
    j["sliding_window"] = nullptr;
  }
  j["bos_token_id"] = c.bos ? json(*c.bos) : json(nullptr);
  j["eos_token_id"] = c.eos ? json(*c.eos) : json(nullptr);
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

std::string write_hf_folder(
    const std::string& dir,
    const LanguageModel& model) {
  std::string config;
  StateDict weights;
  if (const auto* gpt = dynamic_cast<const Gpt*>(&model)) {
    config = hf_gpt2_config(gpt->config());
    weights = hf_gpt2_weights(*gpt);
  } else if (const auto* llama = dynamic_cast<const Llama*>(&model)) {
    const LlamaConfig& c = llama->config();
    if (c.qkv_bias != c.o_bias && c.family == LlamaFamily::Llama) {
      throw UsageError(
          "this Llama has biases on q/k/v but not on o_proj: Hugging Face's LlamaConfig cannot say so",
          "export it as a Qwen2-family model");
    }
    config = hf_llama_config(c);
    for (const auto& p : model.named_parameters()) {
      weights.emplace_back(
          p.key(), p.value().detach().to(at::kCPU, at::kFloat).contiguous());
    }
  } else {
    throw UsageError(
        "export-hf writes GPT and Llama-family models",
        "this model is neither");
  }
  fs::create_directories(dir);
  const std::string file = (fs::path(dir) / "model.safetensors").string();
  write_weights(file, weights, {{"format", "pt"}});
  const fs::path config_file = fs::path(dir) / "config.json";
  std::ofstream out(config_file);
  out << config;
  if (!out.flush()) {
    throw DataError(fmt::format("{}: cannot be written", config_file.string()));
  }
  return file;
}

} // namespace hotloop::model
