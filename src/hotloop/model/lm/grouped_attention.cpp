#include "grouped_attention.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/scaled_dot_product_attention.h>

namespace hotloop::model::lm {

at::Tensor expand_kv_heads(const at::Tensor& t, std::int64_t groups) {
  const auto b = t.size(0);
  const auto h = t.size(1);
  const auto s = t.size(2);
  const auto d = t.size(3);
  return t.unsqueeze(2)
      .expand({b, h, groups, s, d})
      .reshape({b, h * groups, s, d});
}

bool sdpa_takes_groups(
    const c10::Device& device,
    c10::ScalarType dtype,
    bool has_mask) {
  if (!device.is_cuda()) {
    return true;
  }
  return !has_mask && (dtype == c10::kBFloat16 || dtype == c10::kHalf);
}

c10::ScalarType sdpa_dtype(const at::Tensor& query) {
  const c10::DeviceType type = query.device().type();
  if (query.scalar_type() == c10::kFloat &&
      at::autocast::is_autocast_enabled(type)) {
    return at::autocast::get_autocast_dtype(type);
  }
  return query.scalar_type();
}

SdpaOperands sdpa_operands(
    const at::Tensor& query,
    const at::Tensor& keys,
    const at::Tensor& values,
    bool has_mask) {
  const std::int64_t groups = query.size(1) / keys.size(1);
  if (groups == 1) {
    return {keys, values, false};
  }
  if (sdpa_takes_groups(query.device(), sdpa_dtype(query), has_mask)) {
    return {keys, values, true};
  }
  return {
      expand_kv_heads(keys, groups), expand_kv_heads(values, groups), false};
}

at::Tensor grouped_attention(
    const at::Tensor& query,
    const at::Tensor& keys,
    const at::Tensor& values,
    const std::optional<at::Tensor>& mask,
    bool causal) {
  const SdpaOperands in = sdpa_operands(query, keys, values, mask.has_value());
  return at::scaled_dot_product_attention(
      query,
      in.keys,
      in.values,
      mask,
      0.0,
      causal,
      std::nullopt,
      in.enable_gqa);
}

} // namespace hotloop::model::lm
