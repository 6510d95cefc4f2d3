// The CPU convolution as im2col + GEMM (model/gemm_conv.h) against
// LibTorch's convolution (oneDNN): the output and the gradients of the input,
// the weight and the bias agree for 3x3 and 1x1 kernels, strides 1 and 2,
// padding 0 and 1, square and oblong maps, NCHW and channels_last inputs
// (float32: 1e-4 relative, 1e-5 absolute: the two sum the products in a
// different order). And the model's Conv2d takes the GEMM path exactly where
// --cpu-conv says it does.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include "hotloop/errors.h"
#include "hotloop/model/conv2d.h"
#include "hotloop/model/gemm_conv.h"

namespace hotloop::model {
namespace {

struct Case {
  std::int64_t n, c, h, w, o, k, stride, pad;
  bool channels_last;
  bool bias;
};

struct Grads {
  at::Tensor out, input, weight, bias;
};

// out, d(input), d(weight), d(bias) of a loss that weighs every output
// element differently, so that no gradient is a plain sum.
template <typename Conv>
Grads run(
    const Case& t,
    const at::Tensor& x0,
    const at::Tensor& w0,
    const at::Tensor& b0,
    const at::Tensor& weights,
    Conv conv) {
  at::Tensor x = x0.clone().requires_grad_();
  at::Tensor w = w0.clone().requires_grad_();
  at::Tensor b = t.bias ? b0.clone().requires_grad_() : at::Tensor();
  at::Tensor out = conv(x, w, b);
  (out * weights).sum().backward();
  return {out.detach(), x.grad(), w.grad(), t.bias ? b.grad() : at::Tensor()};
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::allclose(a, b, 1e-4, 1e-5);
}

class GemmConvCase : public ::testing::TestWithParam<Case> {};

TEST_P(GemmConvCase, MatchesLibTorchConvolutionAndItsGradients) {
  const Case t = GetParam();
  at::manual_seed(3);
  const auto format = t.channels_last ? at::MemoryFormat::ChannelsLast
                                      : at::MemoryFormat::Contiguous;
  const at::Tensor x = at::randn({t.n, t.c, t.h, t.w}).contiguous(format);
  const at::Tensor w = at::randn({t.o, t.c, t.k, t.k}).contiguous(format) * 0.1;
  const at::Tensor b = at::randn({t.o});
  const std::int64_t oh = (t.h + 2 * t.pad - t.k) / t.stride + 1;
  const std::int64_t ow = (t.w + 2 * t.pad - t.k) / t.stride + 1;
  const at::Tensor weights = at::randn({t.n, t.o, oh, ow});

  const Grads ref = run(
      t,
      x,
      w,
      b,
      weights,
      [&](const at::Tensor& xi, const at::Tensor& wi, const at::Tensor& bi) {
        return at::conv2d(xi, wi, bi, t.stride, t.pad);
      });
  const Grads got = run(
      t,
      x,
      w,
      b,
      weights,
      [&](const at::Tensor& xi, const at::Tensor& wi, const at::Tensor& bi) {
        return gemm_conv2d(
            xi, wi, bi, ConvGeometry{t.stride, t.stride, t.pad, t.pad});
      });
  EXPECT_TRUE(got.out.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(close(got.out, ref.out))
      << (got.out - ref.out).abs().max().item<double>();
  EXPECT_TRUE(close(got.input, ref.input))
      << (got.input - ref.input).abs().max().item<double>();
  EXPECT_TRUE(close(got.weight, ref.weight))
      << (got.weight - ref.weight).abs().max().item<double>();
  if (t.bias) {
    EXPECT_TRUE(close(got.bias, ref.bias));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes,
    GemmConvCase,
    ::testing::Values(
        // n, c, h, w, o, k, stride, pad, channels_last, bias
        Case{4, 16, 4, 4, 24, 3, 1, 1, true, false}, // a ResNet layer4 block
        Case{4, 8, 7, 7, 16, 3, 2, 1, true, false}, // its strided entry
        Case{4, 8, 7, 7, 16, 1, 2, 0, true, false}, // the 1x1 downsample
        Case{3, 5, 6, 9, 7, 3, 1, 1, true, true}, // oblong, odd, bias
        Case{2, 3, 5, 5, 4, 3, 1, 0, false, true}, // NCHW, no padding
        Case{2, 4, 8, 8, 4, 3, 2, 1, false, false}));

TEST(GemmConv, Im2colCopiesEachReceptiveFieldWithZerosOutside) {
  // One image, 2 channels, 2x2, 3x3 kernel, padding 1: output pixel (0, 0)
  // sees the image at kernel positions (1, 1), (1, 2), (2, 1), (2, 2).
  at::Tensor x = at::zeros({1, 2, 2, 2});
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        x[0][c][i][j] = 100 * c + 10 * i + j + 1;
      }
    }
  }
  const at::Tensor col = im2col_nhwc(x, 3, 3, ConvGeometry{1, 1, 1, 1});
  ASSERT_EQ(col.sizes(), (std::vector<std::int64_t>{4, 18}));
  // Row 0, kernel (kh, kw) at columns (kh*3 + kw)*2 + c.
  EXPECT_EQ(col[0][0].item<float>(), 0); // (0, 0): outside
  EXPECT_EQ(col[0][(1 * 3 + 1) * 2 + 0].item<float>(), 1); // x[0, 0, 0]
  EXPECT_EQ(col[0][(1 * 3 + 1) * 2 + 1].item<float>(), 101); // channel 1
  EXPECT_EQ(col[0][(2 * 3 + 2) * 2 + 0].item<float>(), 12); // x[0, 1, 1]
}

TEST(GemmConv, AKernelLargerThanThePaddedInputIsAClearError) {
  const at::Tensor x = at::randn({1, 2, 2, 2});
  const at::Tensor w = at::randn({3, 2, 5, 5});
  EXPECT_THROW(gemm_conv2d(x, w, at::Tensor(), ConvGeometry{}), UsageError);
}

// The layer's choice: Auto takes GEMM for output maps of at most 4x4 pixels
// on fp32 channels_last CPU inputs; OneDnn never; Gemm wherever eligible.
TEST(GemmConv, TheLayerChoosesAsCpuConvSays) {
  Conv2d conv(torch::nn::Conv2dOptions(8, 8, 3).padding(1).bias(false));
  const auto cl = at::MemoryFormat::ChannelsLast;
  const at::Tensor small = at::randn({2, 8, 4, 4}).contiguous(cl);
  const at::Tensor large = at::randn({2, 8, 7, 7}).contiguous(cl);
  const at::Tensor nchw = at::randn({2, 8, 4, 4});
  EXPECT_TRUE(conv->uses_gemm(small));
  EXPECT_FALSE(conv->uses_gemm(large));
  EXPECT_FALSE(conv->uses_gemm(nchw));
  {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    EXPECT_FALSE(conv->uses_gemm(small)); // bf16 autocast: LibTorch's
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
  conv->set_cpu_conv(CpuConv::OneDnn);
  EXPECT_FALSE(conv->uses_gemm(small));
  conv->set_cpu_conv(CpuConv::Gemm);
  EXPECT_TRUE(conv->uses_gemm(large));
  EXPECT_FALSE(conv->uses_gemm(nchw));

  // Both paths give the same layer output, with autograd recording and
  // without (evaluation).
  const at::Tensor a = conv(large);
  at::Tensor a_no_grad;
  {
    at::NoGradGuard no_grad;
    a_no_grad = conv(large);
  }
  conv->set_cpu_conv(CpuConv::OneDnn);
  EXPECT_TRUE(close(a, conv(large)));
  EXPECT_TRUE(close(a_no_grad, conv(large)));
  EXPECT_FALSE(a_no_grad.requires_grad());
}

TEST(GemmConv, ParsesItsFlag) {
  EXPECT_EQ(parse_cpu_conv("auto"), CpuConv::Auto);
  EXPECT_EQ(parse_cpu_conv("onednn"), CpuConv::OneDnn);
  EXPECT_EQ(parse_cpu_conv("gemm"), CpuConv::Gemm);
  EXPECT_THROW(parse_cpu_conv("winograd"), UsageError);
  EXPECT_STREQ(to_string(CpuConv::Gemm), "gemm");
}

} // namespace
} // namespace hotloop::model
