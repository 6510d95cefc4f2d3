#pragma once
// Attention on packed rows (model/model_batch.h's PackedRows): each token
// sees the earlier tokens of its own sequence only, so a row of several
// examples trains as the examples would one at a time.
//
// Three ways, chosen once per forward (plan_attention):
// - Flash attention's variable-length form where it runs: a CUDA query in
//   bf16 or fp16 (autocast's dtype counts) with a head width that is a
//   multiple of 8 up to 256 (flash needs an Ampere or newer GPU). The rows
//   are one (B x T) sequence of tokens cut at PackedRows::starts; no mask is
//   made, grouped keys and values are taken as they are, and it is
//   differentiable (at::_flash_attention_forward).
// - On the CPU, each sequence on its own: one causal SDPA call per sequence
//   (the starts are host memory there), which computes only the sequences'
//   own scores: 1.84x faster than the mask below for rows of 5 or 6
//   examples at context 2048 (bench/document_attention_cpu.py,
//   docs/language-models.md).
// - Elsewhere (CUDA in fp32) a block-causal mask, (B, 1, T, T) booleans made
//   once per forward from the positions, through SDPA (grouped_attention.h):
//   its memory-efficient kernel takes masks; flash does not, so the mask is
//   never the bf16/fp16 path.
// Without rows: causal attention over each whole row, as before.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

#include "hotloop/model/activation_checkpoint.h"
#include "hotloop/model/model_batch.h"

namespace hotloop::model::lm {

enum class AttentionPath { Causal, Varlen, PerSequence, Mask };

struct AttentionPlan {
  PackedRows rows; // empty: causal over each row
  AttentionPath path = AttentionPath::Causal;
  std::optional<at::Tensor> mask; // (B, 1, T, T) bool: the Mask path's

  // The plan as a checkpointed segment keeps it (activation_checkpoint.h),
  // and back.
  void add_to(SegmentSide& side) const;
  static AttentionPlan from(
      const SegmentSide& side,
      std::size_t& tensor,
      std::size_t& integer);
};

// The plan for a forward on `rows` whose hidden states are like `x`
// (B, T, C), with heads of `head_width`. UsageError for rows whose sequences
// cross a row's end.
AttentionPlan plan_attention(
    const PackedRows& rows,
    const at::Tensor& x,
    std::int64_t head_width);

// UsageError unless `rows`' starts cut its B rows of `t` tokens into
// non-empty sequences that each lie within one row (what the loader makes).
void check_starts(const PackedRows& rows, std::int64_t t);

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
