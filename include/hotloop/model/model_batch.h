#pragma once
// A batch as a model's training objective takes it (Model::objective): the
// inputs, the targets and, for a language model on packed rows
// (data/tokens/packing.h), where each example sits in them.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace hotloop::model {

// Rows of token ids that hold several examples (sequences) each. Every
// token attends only to the earlier tokens of its own sequence, at its
// position in that sequence.
struct PackedRows {
  // (B, T) int64: each token's position in its sequence, 0 at its first.
  at::Tensor positions;
  // (N + 1) int32: where each of the N sequences starts in the B x T tokens
  // read row by row, then B x T (flash attention's cu_seqlens).
  at::Tensor starts;
  std::int64_t longest = 0; // the longest sequence's tokens
  bool empty() const {
    return !positions.defined();
  }
};

struct ModelBatch {
  at::Tensor inputs; // images (B, C, H, W) or token ids (B, T)
  at::Tensor targets; // labels (B) or next tokens (B, T); -100: none
  PackedRows rows; // empty: one sequence a row
  // The targets that are not -100, counted on the host as the loader made
  // the batch; -1: not counted (every target is one, or unknown).
  std::int64_t trained = -1;
};

} // namespace hotloop::model
