#include "hotloop/model/lm/document_attention.h"

#include <tuple>

#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/ones.h>

#include "hotloop/model/lm/grouped_attention.h"

namespace hotloop::model::lm {

namespace {

bool flash_takes(c10::ScalarType dtype, std::int64_t head_width) {
  return (dtype == c10::kBFloat16 || dtype == c10::kHalf) &&
      head_width % 8 == 0 && head_width <= 256;
}

} // namespace

void AttentionPlan::add_to(SegmentSide& side) const {
  side.tensors.push_back(rows.positions);
  side.tensors.push_back(rows.starts);
  side.tensors.push_back(mask.value_or(at::Tensor()));
  side.ints.push_back(rows.longest);
  side.ints.push_back(varlen ? 1 : 0);
}

AttentionPlan AttentionPlan::from(
    const SegmentSide& side,
    std::size_t& tensor,
    std::size_t& integer) {
  AttentionPlan p;
  p.rows.positions = side.tensors.at(tensor++);
  p.rows.starts = side.tensors.at(tensor++);
  const at::Tensor& mask = side.tensors.at(tensor++);
  if (mask.defined()) {
    p.mask = mask;
  }
  p.rows.longest = side.ints.at(integer++);
  p.varlen = side.ints.at(integer++) != 0;
  return p;
}

at::Tensor block_causal_mask(const at::Tensor& positions) {
  const std::int64_t t = positions.size(1);
  const at::Tensor sequence = positions.eq(0).cumsum(1);
  const at::Tensor same = sequence.unsqueeze(2).eq(sequence.unsqueeze(1));
  const at::Tensor causal =
      at::ones(
          {t, t},
          at::TensorOptions().dtype(at::kBool).device(positions.device()))
          .tril();
  return same.logical_and(causal);
}

AttentionPlan plan_attention(
    const PackedRows& rows,
    const at::Tensor& x,
    std::int64_t head_width) {
  AttentionPlan plan;
  if (rows.empty()) {
    return plan;
  }
  plan.rows = rows;
  // The query's dtype under autocast: x is float32 there, the projections
  // are not.
  plan.varlen = x.is_cuda() && flash_takes(sdpa_dtype(x), head_width);
  if (!plan.varlen) {
    plan.mask = block_causal_mask(rows.positions).unsqueeze(1);
  }
  return plan;
}

at::Tensor attend(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    const AttentionPlan& plan) {
  if (plan.rows.empty()) {
    return grouped_attention(q, k, v, std::nullopt, /*causal=*/true);
  }
  if (!plan.varlen) {
    return grouped_attention(q, k, v, plan.mask, /*causal=*/false);
  }
  const std::int64_t b = q.size(0);
  const std::int64_t t = q.size(2);
  const c10::ScalarType dtype = sdpa_dtype(q);
  // (B, H, T, D) -> (B x T, H, D): the rows as one sequence of tokens.
  auto tokens = [&](const at::Tensor& y) {
    return y.transpose(1, 2).reshape({b * t, y.size(1), y.size(3)}).to(dtype);
  };
  const at::Tensor y = std::get<0>(at::_flash_attention_forward(
      tokens(q),
      tokens(k),
      tokens(v),
      plan.rows.starts,
      plan.rows.starts,
      plan.rows.longest,
      plan.rows.longest,
      /*dropout_p=*/0.0,
      /*is_causal=*/true,
      /*return_debug_mask=*/false));
  return y.view({b, t, q.size(1), q.size(3)}).transpose(1, 2);
}

} // namespace hotloop::model::lm
