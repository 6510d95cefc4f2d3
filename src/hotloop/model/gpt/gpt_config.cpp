#include "hotloop/model/gpt/gpt_config.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

std::int64_t GptConfig::non_embedding_parameters() const {
  const std::int64_t c = width;
  const std::int64_t per_layer = 4 * c // two LayerNorms
      + c * 3 * c + 3 * c // c_attn
      + c * c + c // attn.c_proj
      + c * 4 * c + 4 * c // c_fc
      + 4 * c * c + c; // mlp.c_proj
  return layers * per_layer + 2 * c + padded_vocab() * c;
}

double GptConfig::training_flops_per_token() const {
  return 6.0 * static_cast<double>(non_embedding_parameters()) +
      12.0 * static_cast<double>(layers) * static_cast<double>(context) *
      static_cast<double>(width);
}

void GptConfig::validate() const {
  auto at_least = [](const char* flag, std::int64_t v, std::int64_t min) {
    if (v < min) {
      throw UsageError(
          fmt::format("--{} {}: must be at least {}", flag, v, min));
    }
  };
  at_least("layers", layers, 1);
  at_least("heads", heads, 1);
  at_least("width", width, 1);
  at_least("context", context, 1);
  at_least("vocab", vocab, 2);
  if (width % heads != 0) {
    throw UsageError(
        fmt::format("--width {} is not a multiple of --heads {}", width, heads),
        "each head takes width / heads channels: pick a width that divides");
  }
}

} // namespace hotloop::model
