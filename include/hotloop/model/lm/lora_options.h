#pragma once
// What LoRA adapts and how (model/lm/lora.h applies it). No LibTorch here:
// the PEFT config reader builds without it.

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::model {

struct LoraOptions {
  std::int64_t rank = 0; // 0: no LoRA
  double alpha = 16; // the update's scale is alpha / rank
  double dropout = 0; // on the adapters' input, in training
  // Projection names (a module whose name is one of these or ends with
  // "." + one of these, as PEFT matches target_modules); empty: every
  // projection of the blocks (Llama: q/k/v/o_proj, gate/up/down_proj;
  // GPT-2: c_attn, c_proj, c_fc).
  std::vector<std::string> targets;

  bool enabled() const {
    return rank > 0;
  }
  double scale() const {
    return alpha / static_cast<double>(rank);
  }
};

} // namespace hotloop::model
