// Grouped-query attention's SDPA call (model/lm/grouped_attention.h): which
// form of the keys and values each device, precision and mask gets, and that
// the expanded form is the same attention as SDPA's own grouping. On a GPU
// (scripts/gpu-check's sdpa stage prints them): the kernel SDPA picks for
// llama-nano's and Qwen2.5-0.5B's shapes in fp32 (and tf32), bf16 and fp16 is
// a fused one, never the math kernel.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/cuda.h>

#include "hotloop/model/lm/grouped_attention.h"
#include "hotloop/train/precision.h"

namespace hotloop::model::lm {
namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kGpu(c10::kCUDA, 0);

TEST(GroupedAttention, OnCudaFp32OrAMaskGetsExpandedKeysBf16AndFp16TheGroups) {
  EXPECT_FALSE(sdpa_takes_groups(kGpu, c10::kFloat, false));
  EXPECT_FALSE(sdpa_takes_groups(kGpu, c10::kDouble, false));
  EXPECT_TRUE(sdpa_takes_groups(kGpu, c10::kBFloat16, false));
  EXPECT_TRUE(sdpa_takes_groups(kGpu, c10::kHalf, false));
  EXPECT_FALSE(sdpa_takes_groups(kGpu, c10::kBFloat16, true)); // a mask
  // The CPU's flash kernel takes grouped fp32 and masks.
  EXPECT_TRUE(sdpa_takes_groups(kCpu, c10::kFloat, false));
  EXPECT_TRUE(sdpa_takes_groups(kCpu, c10::kFloat, true));
}

TEST(GroupedAttention, OperandsAreExpandedOnlyWhereTheGroupsAreNotTaken) {
  const at::Tensor q = at::randn({2, 6, 5, 8});
  const at::Tensor kv = at::randn({2, 2, 5, 8});
  const SdpaOperands grouped = sdpa_operands(q, kv, kv, false);
  EXPECT_TRUE(grouped.enable_gqa); // the CPU: as they are
  EXPECT_EQ(grouped.keys.size(1), 2);
  const SdpaOperands same = sdpa_operands(q, at::randn({2, 6, 5, 8}), q, false);
  EXPECT_FALSE(same.enable_gqa); // as many heads: nothing to group
}

// Under autocast SDPA runs a float32 query in the autocast dtype (a Llama
// query in bf16 training is float32: its rotation multiplies by float32
// cos/sin), so the choice follows that dtype, not the query's.
TEST(GroupedAttention, UnderAutocastAFloat32QueryCountsAsTheAutocastDtype) {
  const at::Tensor q = at::randn({1, 4, 3, 8});
  EXPECT_EQ(sdpa_dtype(q), c10::kFloat);
  {
    const train::AutocastScope autocast(train::Precision::Bf16, kCpu);
    EXPECT_EQ(sdpa_dtype(q), c10::kBFloat16);
    EXPECT_EQ(sdpa_dtype(q.to(c10::kDouble)), c10::kDouble);
  }
  EXPECT_EQ(sdpa_dtype(q), c10::kFloat);
}

// Head h of the expansion is head h / groups: SDPA's pairing, so the
// expanded call is the same attention (fp32, within 1e-6) with a causal
// flag and with a mask.
TEST(GroupedAttention, ExpandedKeysAndValuesGiveSdpasOwnGroupedAttention) {
  at::manual_seed(0);
  const at::Tensor q = at::randn({2, 6, 7, 8});
  const at::Tensor k = at::randn({2, 2, 7, 8});
  const at::Tensor v = at::randn({2, 2, 7, 8});
  const at::Tensor ke = expand_kv_heads(k, 3);
  const at::Tensor ve = expand_kv_heads(v, 3);
  ASSERT_EQ(ke.sizes(), q.sizes());
  EXPECT_TRUE(ke.select(1, 4).equal(k.select(1, 1)));
  const at::Tensor causal = at::scaled_dot_product_attention(
      q, k, v, std::nullopt, 0.0, true, std::nullopt, true);
  EXPECT_TRUE(at::allclose(
      at::scaled_dot_product_attention(q, ke, ve, std::nullopt, 0.0, true),
      causal,
      1e-6,
      1e-6));
  const at::Tensor mask = at::rand({7, 7}) > 0.3;
  const at::Tensor masked = at::scaled_dot_product_attention(
      q, k, v, mask, 0.0, false, std::nullopt, true);
  EXPECT_TRUE(at::allclose(
      at::scaled_dot_product_attention(q, ke, ve, mask, 0.0, false),
      masked,
      1e-6,
      1e-6));
}

std::string backend_name(std::int64_t choice) {
  switch (choice) {
    case 0:
      return "math";
    case 1:
      return "flash";
    case 2:
      return "memory-efficient";
    case 3:
      return "cudnn";
    default:
      return "backend " + std::to_string(choice);
  }
}

// The kernel SDPA picks for a training step's attention (inputs that need
// gradients) with hotloop's operands, for each precision: never math. Also
// a KV-cache multi-token step's masked call.
TEST(GroupedAttention, OnAGpuEveryPrecisionTakesAFusedKernel) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device here";
  }
  struct Shape {
    const char* model;
    std::int64_t batch, heads, kv_heads, tokens, head_dim;
  };
  for (const Shape& s :
       {Shape{"llama-nano", 16, 4, 2, 128, 32},
        Shape{"qwen2.5-0.5b", 16, 14, 2, 1024, 64}}) {
    // fp32 (and tf32), bf16 and fp16 queries, and what bf16 training
    // passes: a float32 query (Llama's rotation) under bf16 autocast, which
    // SDPA runs in bf16.
    struct Case {
      c10::ScalarType dtype;
      bool autocast;
      const char* name;
    };
    for (const Case& c :
         {Case{c10::kFloat, false, "fp32"},
          Case{c10::kBFloat16, false, "bf16"},
          Case{c10::kHalf, false, "fp16"},
          Case{c10::kFloat, true, "fp32 query under bf16 autocast"}}) {
      for (const bool masked : {false, true}) {
        const auto o = at::TensorOptions().device(kGpu).dtype(c.dtype);
        const std::int64_t t = masked ? 4 : s.tokens; // a multi-token step's
        const at::Tensor q =
            at::randn({s.batch, s.heads, t, s.head_dim}, o).requires_grad_();
        const at::Tensor kv =
            at::randn({s.batch, s.kv_heads, s.tokens, s.head_dim}, o)
                .requires_grad_();
        std::optional<at::Tensor> mask;
        if (masked) {
          mask = at::ones({t, s.tokens}, o.dtype(at::kBool));
        }
        std::optional<train::AutocastScope> autocast;
        if (c.autocast) {
          autocast.emplace(train::Precision::Bf16, kGpu);
        }
        const SdpaOperands in = sdpa_operands(q, kv, kv, masked);
        // What SDPA sees once autocast has cast its inputs.
        const c10::ScalarType runs = sdpa_dtype(q);
        const std::int64_t choice = at::_fused_sdp_choice(
            q.to(runs),
            in.keys.to(runs),
            in.values.to(runs),
            mask,
            0.0,
            !masked,
            std::nullopt,
            in.enable_gqa);
        std::printf(
            "sdpa: %s %s%s: %s (enable_gqa %s)\n",
            s.model,
            c.name,
            masked ? " masked" : "",
            backend_name(choice).c_str(),
            in.enable_gqa ? "on" : "off");
        EXPECT_NE(choice, 0)
            << s.model << " " << c.name << (masked ? " masked" : "");
        if (c.autocast && !masked) {
          EXPECT_TRUE(in.enable_gqa) << "bf16 training keeps the groups";
        }
      }
    }
  }
}

} // namespace
} // namespace hotloop::model::lm
