#pragma once
// Sampling text from a language model (GPT, the Llama family): the prompt's
// tokens go through the model once, then one token at a time with the keys and
// values of the earlier positions kept (KvCache), so each new token costs one
// position's forward instead of the whole sequence's. Past the model's context
// the window slides (the last `context` tokens are run again, as the uncached
// path does).

#include <cstdint>
#include <functional>
#include <vector>

#include "hotloop/model/lm/language_model.h"

namespace hotloop::model {

struct GenerateOptions {
  std::int64_t tokens = 200; // new tokens
  double temperature = 0.8; // 0: always the most likely token (greedy)
  std::int64_t top_k = 200; // sample among the k most likely; 0: all
  std::uint64_t seed = 0;
  bool use_cache = true; // false: the whole window again for every token
  // Tokens that end the text (EOS, a chat answer's end): generation stops
  // after making one (it is in the output and seen by on_token).
  std::vector<std::int64_t> stop;
};

// The prompt's continuation: `options.tokens` new token ids (the prompt not
// included). The model is put in eval mode; its device is where the work
// runs. `on_token` (optional) sees each new token as it is made. Throws
// UsageError for an empty prompt or a token outside the vocabulary.
std::vector<std::int64_t> generate(
    LanguageModel& model,
    const std::vector<std::int64_t>& prompt,
    const GenerateOptions& options,
    const std::function<void(std::int64_t)>& on_token = {});

} // namespace hotloop::model
