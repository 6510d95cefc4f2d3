#include "hotloop/model/llama/llama_config.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

std::int64_t LlamaConfig::non_embedding_parameters() const {
  const std::int64_t d = head_dim();
  const std::int64_t q = heads * d;
  const std::int64_t kv = kv_heads * d;
  const std::int64_t per_layer = 2 * width // two RMSNorms
      + width * (q + 2 * kv) + (qkv_bias ? q + 2 * kv : 0) // q, k, v
      + q * width + (o_bias ? width : 0) // o_proj
      + 3 * width * intermediate + (mlp_bias ? 2 * intermediate + width : 0);
  return layers * per_layer + width + vocab * width;
}

double LlamaConfig::training_flops_per_token() const {
  return 6.0 * static_cast<double>(non_embedding_parameters()) +
      12.0 * static_cast<double>(layers) * static_cast<double>(context) *
      static_cast<double>(heads * head_dim());
}

void LlamaConfig::validate() const {
  auto at_least = [](const char* flag, std::int64_t v, std::int64_t min) {
    if (v < min) {
      throw UsageError(fmt::format("{} {}: must be at least {}", flag, v, min));
    }
  };
  at_least("--layers", layers, 1);
  at_least("--heads", heads, 1);
  at_least("key/value heads", kv_heads, 1);
  at_least("--width", width, 1);
  at_least("intermediate size", intermediate, 1);
  at_least("--context", context, 1);
  at_least("--vocab", vocab, 2);
  if (head_width == 0 && width % heads != 0) {
    throw UsageError(
        fmt::format("--width {} is not a multiple of --heads {}", width, heads),
        "each head takes width / heads channels: pick a width that divides");
  }
  if (heads % kv_heads != 0) {
    throw UsageError(fmt::format(
        "{} attention heads do not share {} key/value heads evenly",
        heads,
        kv_heads));
  }
  if (head_dim() % 2 != 0) {
    throw UsageError(fmt::format(
        "a head width of {} is odd: rotary embeddings rotate pairs of channels",
        head_dim()));
  }
  if (context > max_positions) {
    throw UsageError(
        fmt::format(
            "--context {} is longer than the model's {} positions",
            context,
            max_positions),
        fmt::format("pass --context {} or less", max_positions));
  }
}

} // namespace hotloop::model
