#include "hotloop/model/lm/document_attention.h"

#include <limits>
#include <tuple>
#include <vector>

#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"

#include "hotloop/model/lm/grouped_attention.h"

namespace hotloop::model::lm {

namespace {

// Flash attention's variable-length form runs for bf16/fp16 queries with
// heads up to 256 wide in multiples of 8, on Ampere (8.0) or newer.
bool flash_takes(
    const at::Tensor& x,
    c10::ScalarType dtype,
    std::int64_t head_width) {
  return (dtype == c10::kBFloat16 || dtype == c10::kHalf) &&
      head_width % 8 == 0 && head_width <= 256 &&
      cuda::compute_capability(x.device().index()) >= 80;
}

} // namespace

void AttentionPlan::add_to(SegmentSide& side) const {
  side.tensors.push_back(rows.positions);
  side.tensors.push_back(rows.starts);
  side.tensors.push_back(mask.value_or(at::Tensor()));
  side.ints.push_back(rows.longest);
  side.ints.push_back(static_cast<std::int64_t>(path));
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
  p.path = static_cast<AttentionPath>(side.ints.at(integer++));
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
  const c10::ScalarType dtype = sdpa_dtype(x);
  if (x.is_cuda()) {
    plan.path = flash_takes(x, dtype, head_width) ? AttentionPath::Varlen
                                                  : AttentionPath::Mask;
  } else {
    plan.path = AttentionPath::PerSequence;
    check_starts(rows, x.size(1));
  }
  if (plan.path == AttentionPath::Mask) {
    // Additive, in the query's dtype, made once: every layer's SDPA takes
    // it as it is (a boolean mask would be converted, and kept for
    // backward, in each layer).
    const at::Tensor allowed = block_causal_mask(rows.positions).unsqueeze(1);
    plan.mask =
        at::zeros(allowed.sizes(), x.options().dtype(dtype))
            .masked_fill_(
                allowed.logical_not(), -std::numeric_limits<float>::infinity());
  }
  return plan;
}

namespace {

// Each sequence of each row alone, causal, put back in its place.
at::Tensor per_sequence(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    const PackedRows& rows) {
  const std::int64_t t = q.size(2);
  const at::Tensor& starts = rows.starts; // int32, host memory here
  const auto* s = starts.data_ptr<std::int32_t>();
  std::vector<at::Tensor> out_rows;
  std::vector<at::Tensor> row;
  for (std::int64_t i = 0; i + 1 < starts.size(0); ++i) {
    const std::int64_t b = s[i] / t;
    const std::int64_t first = s[i] % t;
    const std::int64_t n = s[i + 1] - s[i];
    auto piece = [&](const at::Tensor& y) {
      return y.narrow(0, b, 1).narrow(2, first, n);
    };
    row.push_back(grouped_attention(
        piece(q), piece(k), piece(v), std::nullopt, /*causal=*/true));
    if (first + n == t) {
      out_rows.push_back(at::cat(row, 2));
      row.clear();
    }
  }
  return at::cat(out_rows, 0);
}

} // namespace

void check_starts(const PackedRows& rows, std::int64_t t) {
  const at::Tensor& starts = rows.starts; // int32, host memory here
  const auto* s = starts.data_ptr<std::int32_t>();
  const std::int64_t n = starts.size(0);
  const std::int64_t b = rows.positions.size(0);
  bool fits = n >= 2 && s[0] == 0 && s[n - 1] == b * t;
  for (std::int64_t i = 0; fits && i + 1 < n; ++i) {
    // Within one row, and not empty.
    fits = s[i + 1] > s[i] && (s[i] / t == (s[i + 1] - 1) / t);
  }
  if (!fits) {
    throw UsageError(fmt::format(
        "packed rows: sequence starts that do not cut {} rows of {} tokens into sequences within each row",
        b,
        t));
  }
}

at::Tensor attend(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    const AttentionPlan& plan) {
  switch (plan.path) {
    case AttentionPath::Causal:
      return grouped_attention(q, k, v, std::nullopt, /*causal=*/true);
    case AttentionPath::PerSequence:
      return per_sequence(q, k, v, plan.rows);
    case AttentionPath::Mask:
      return grouped_attention(q, k, v, plan.mask, /*causal=*/false);
    case AttentionPath::Varlen:
      break;
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
