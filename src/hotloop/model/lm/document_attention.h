#pragma once
// Attention on packed rows (model/model_batch.h's PackedRows): each token
// sees the earlier tokens of its own sequence only, so a row of several
// examples trains as the examples would one at a time.
//
// Two ways, chosen once per forward (plan_attention):
// - Flash attention's variable-length form where it runs: a CUDA query in
//   bf16 or fp16 (autocast's dtype counts) with a head width that is a
//   multiple of 8 up to 256 (flash needs an Ampere or newer GPU). The rows
//   are one (B x T) sequence of tokens cut at PackedRows::starts; no mask is
//   made, grouped keys and values are taken as they are, and it is
//   differentiable (at::_flash_attention_forward).
// - Elsewhere a block-causal mask, (B, 1, T, T) booleans made once per
//   forward from the positions, through SDPA (grouped_attention.h). A mask
//   makes CUDA's SDPA leave its flash kernel, so that is only the fallback
//   there (fp32); on the CPU it is the faster of the two correct ways
//   measured (docs/language-models.md, "Packing").
// Without rows: causal attention over each whole row, as before.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

#include "hotloop/model/activation_checkpoint.h"
#include "hotloop/model/model_batch.h"

namespace hotloop::model::lm {

struct AttentionPlan {
  PackedRows rows; // empty: causal over each row
  bool varlen = false; // flash's variable-length form
  std::optional<at::Tensor> mask; // (B, 1, T, T) bool: the fallback's

  // The plan as a checkpointed segment keeps it (activation_checkpoint.h),
  // and back.
  void add_to(SegmentSide& side) const;
  static AttentionPlan from(
      const SegmentSide& side,
      std::size_t& tensor,
      std::size_t& integer);
};

// The plan for a forward on `rows` whose hidden states are like `x`
// (B, T, C), with heads of `head_width`.
AttentionPlan plan_attention(
    const PackedRows& rows,
    const at::Tensor& x,
    std::int64_t head_width);

// (B, T, T) block-causal: [b, i, j] when j <= i in the same sequence of
// row b, the sequences starting where `positions` (B, T) is 0.
at::Tensor block_causal_mask(const at::Tensor& positions);

// softmax(q k^T / sqrt(D)) v under `plan`: q (B, H, T, D), k and v
// (B, H_kv, T, D) with H a multiple of H_kv -> (B, H, T, D).
at::Tensor attend(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    const AttentionPlan& plan);

} // namespace hotloop::model::lm
