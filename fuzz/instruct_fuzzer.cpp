// libFuzzer target for instruction data's lines
// (data/tokens/instruction_encoder.h): any line must become tokens or give a
// DataError, never a crash, a stack overflow or a huge allocation. Each line
// goes through three encoders of one byte-level tokenizer: Qwen3's training
// template (generation blocks), Qwen2.5's (each assistant turn) and the
// built-in ChatML; what they return has a trained flag per token and ids
// inside the vocabulary. Built and run by fuzz/run (from the checkout, for
// tests/data/chat_templates), seeded with fuzz/seeds/instruct.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/tokens/instruction_encoder.h"
#include "hotloop/errors.h"
#include "tests/support/byte_stand_ins.h"

namespace {

namespace fs = std::filesystem;
using hotloop::data::ChatTemplate;
using hotloop::data::InstructionEncoder;

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A model folder: the 256 bytes, the ChatML tokens, `chat_template` (a file
// of tests/data/chat_templates, or none).
std::string write_folder(
    const fs::path& dir,
    const std::string& chat_template) {
  fs::create_directories(dir);
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[hotloop::test::stand_in(b)] = b;
  }
  nlohmann::json added = nlohmann::json::array();
  int id = 256;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back({{"id", id}, {"content", t}, {"special", true}});
    vocab[t] = id++;
  }
  const nlohmann::json tokenizer = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", nlohmann::json::array()}}},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"use_regex", true}}},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"post_processor", nullptr}};
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  nlohmann::json config = {{"eos_token", "<|im_end|>"}};
  if (!chat_template.empty()) {
    config["chat_template"] =
        read_text(fs::path("tests/data/chat_templates") / chat_template);
  }
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir.string();
}

struct Encoders {
  std::vector<std::unique_ptr<InstructionEncoder>> all;
  Encoders() {
    const fs::path root = fs::temp_directory_path() /
        ("hotloop-instruct-fuzz-" + std::to_string(::getpid()));
    all.push_back(std::make_unique<InstructionEncoder>(
        write_folder(root / "qwen3", "qwen3-training.jinja"),
        ChatTemplate::Folder));
    all.push_back(std::make_unique<InstructionEncoder>(
        write_folder(root / "qwen2.5", "qwen2.5.jinja"), ChatTemplate::Folder));
    all.push_back(std::make_unique<InstructionEncoder>(
        write_folder(root / "chatml", ""), ChatTemplate::ChatMl));
    fs::remove_all(root);
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  static Encoders encoders;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  for (const auto& e : encoders.all) {
    try {
      const auto tokens = e->encode(line);
      if (tokens.trained.size() != tokens.ids.size()) {
        __builtin_trap();
      }
      for (const std::uint32_t id : tokens.ids) {
        if (id >= static_cast<std::uint32_t>(e->tokenizer().vocab_size())) {
          __builtin_trap();
        }
      }
    } catch (const hotloop::DataError&) {
    }
  }
  return 0;
}
