#pragma once
// A GPT's shape (model/gpt/gpt.h builds it). No LibTorch here: the
// config.json reader builds without it.

#include <cstdint>

namespace hotloop::model {

struct GptConfig {
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  std::int64_t width = 128; // n_embd
  std::int64_t context = 128; // n_positions: the longest sequence
  std::int64_t vocab = 256; // real tokens; padded_vocab() rounds it up
  std::int64_t padded_vocab() const {
    return (vocab + 63) / 64 * 64;
  }
  // Parameters without the position embedding (the "N" of 6N FLOPs/token).
  std::int64_t non_embedding_parameters() const;
  // Training FLOPs per token: 6N + 12 * layers * context * width (PaLM,
  // appendix B; nanoGPT's estimate_mfu).
  double training_flops_per_token() const;
  void validate() const; // UsageError naming the flag
};

} // namespace hotloop::model
