#pragma once
// Grouped-query attention (fewer key/value heads than query heads: every
// named Llama size and most Hugging Face folders) through
// at::scaled_dot_product_attention, in the form a fused kernel takes.
//
// LibTorch 2.11's SDPA takes grouped keys and values as they are
// (enable_gqa) in its flash kernel and its math kernel only (the note in
// torch.nn.functional.scaled_dot_product_attention's documentation). Flash
// and cuDNN take fp16 and bf16 queries and no mask; the memory-efficient
// kernel takes fp32 and masks but not enable_gqa. So on CUDA an fp32 or tf32
// query, or a mask (the KV cache's decode steps), with enable_gqa leaves the
// math kernel, which materializes (B, H, T, T) scores in every layer
// (Qwen2.5-0.5B at 16 x 1024: about 0.9 GB a layer). There the keys and
// values are expanded to one per query head (as transformers' repeat_kv
// does) and SDPA picks the memory-efficient kernel. bf16/fp16 without a mask
// keep enable_gqa (flash, no copies); the CPU keeps it too (its flash kernel
// takes grouped fp32 and masks: at::_fused_sdp_choice on the CPU says so).

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace hotloop::model::lm {

// Whether SDPA on `device` gets grouped keys and values as they are
// (enable_gqa), for a query of `dtype`, with or without a mask.
bool sdpa_takes_groups(
    const c10::Device& device,
    c10::ScalarType dtype,
    bool has_mask);

// (B, H_kv, S, D) -> (B, H_kv * groups, S, D): head h of the result is head
// h / groups of `t`, the pairing of SDPA's enable_gqa and of transformers'
// repeat_kv.
at::Tensor expand_kv_heads(const at::Tensor& t, std::int64_t groups);

// The dtype SDPA computes `query` in: under autocast (SDPA is on its
// lower-precision list) a float32 query's is the autocast dtype. A Llama
// query under bf16 autocast is float32 (its rotation multiplies the bf16
// projection by float32 cos/sin) but runs in bf16.
c10::ScalarType sdpa_dtype(const at::Tensor& query);

// What SDPA is called with: the keys and values (expanded to the query's
// heads, or as given) and its enable_gqa flag (false when there are as many
// key/value heads as query heads).
struct SdpaOperands {
  at::Tensor keys;
  at::Tensor values;
  bool enable_gqa = false;
};
// `query` (B, H, T, D); `keys` and `values` (B, H_kv, S, D) with H a
// multiple of H_kv. The choice is sdpa_takes_groups for the query's device
// and sdpa_dtype.
SdpaOperands sdpa_operands(
    const at::Tensor& query,
    const at::Tensor& keys,
    const at::Tensor& values,
    bool has_mask);

// softmax(q k^T / sqrt(D) (+ mask, or causal)) v with the operands above:
// (B, H, T, D).
at::Tensor grouped_attention(
    const at::Tensor& query,
    const at::Tensor& keys,
    const at::Tensor& values,
    const std::optional<at::Tensor>& mask,
    bool causal);

} // namespace hotloop::model::lm
