#include "hotloop/model/gemm_conv.h"

#include <cstring>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Shape {
  std::int64_t n, c, h, w; // input
  std::int64_t kh, kw;
  std::int64_t oh, ow; // output
  std::int64_t rows() const {
    return n * oh * ow;
  }
  std::int64_t cols() const {
    return kh * kw * c;
  }
};

Shape shape_of(
    const at::Tensor& input,
    std::int64_t kernel_h,
    std::int64_t kernel_w,
    const ConvGeometry& g) {
  Shape s{
      input.size(0),
      input.size(1),
      input.size(2),
      input.size(3),
      kernel_h,
      kernel_w,
      conv_output_size(input.size(2), kernel_h, g.stride_h, g.pad_h),
      conv_output_size(input.size(3), kernel_w, g.stride_w, g.pad_w)};
  if (s.oh <= 0 || s.ow <= 0) {
    throw UsageError(fmt::format(
        "convolution: a {}x{} kernel with padding {}x{} does not fit a {}x{} input",
        kernel_h,
        kernel_w,
        g.pad_h,
        g.pad_w,
        s.h,
        s.w));
  }
  return s;
}

// Rows of output pixels per parallel task: enough to amortize the dispatch.
constexpr std::int64_t kGrain = 16;

// col[(n, oh, ow), (kh, kw, c)] = x[n, oh*sh - ph + kh, ow*sw - pw + kw, c],
// zero outside the image. x is NHWC-contiguous.
void im2col(const float* x, float* col, const Shape& s, const ConvGeometry& g) {
  const std::size_t vec = static_cast<std::size_t>(s.c) * sizeof(float);
  at::parallel_for(0, s.rows(), kGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const std::int64_t ow = r % s.ow;
      const std::int64_t oh = (r / s.ow) % s.oh;
      const std::int64_t n = r / (s.ow * s.oh);
      float* dst = col + r * s.cols();
      for (std::int64_t i = 0; i < s.kh; ++i) {
        const std::int64_t ih = oh * g.stride_h - g.pad_h + i;
        for (std::int64_t j = 0; j < s.kw; ++j, dst += s.c) {
          const std::int64_t iw = ow * g.stride_w - g.pad_w + j;
          if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) {
            std::memset(dst, 0, vec);
          } else {
            std::memcpy(dst, x + ((n * s.h + ih) * s.w + iw) * s.c, vec);
          }
        }
      }
    }
  });
}

// The adjoint of im2col: dx[n, ih, iw, c] = the sum of the column entries
// that copied it. One image per task, so no two tasks write the same pixel.
void col2im(
    const float* col,
    float* dx,
    const Shape& s,
    const ConvGeometry& g) {
  const std::int64_t image = s.h * s.w * s.c;
  std::memset(dx, 0, static_cast<std::size_t>(s.n * image) * sizeof(float));
  at::parallel_for(0, s.n, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t n = lo; n < hi; ++n) {
      float* out = dx + n * image;
      const float* src = col + n * s.oh * s.ow * s.cols();
      for (std::int64_t oh = 0; oh < s.oh; ++oh) {
        for (std::int64_t ow = 0; ow < s.ow; ++ow) {
          for (std::int64_t i = 0; i < s.kh; ++i) {
            const std::int64_t ih = oh * g.stride_h - g.pad_h + i;
            for (std::int64_t j = 0; j < s.kw; ++j, src += s.c) {
              const std::int64_t iw = ow * g.stride_w - g.pad_w + j;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) {
                continue;
              }
              float* __restrict d = out + (ih * s.w + iw) * s.c;
              const float* __restrict v = src;
              for (std::int64_t c = 0; c < s.c; ++c) {
                d[c] += v[c];
              }
            }
          }
        }
      }
    }
  });
}

// NHWC-contiguous storage of an (N, C, H, W) tensor (a no-op when it is
// channels_last already).
at::Tensor nhwc(const at::Tensor& t) {
  return t.contiguous(at::MemoryFormat::ChannelsLast);
}

// The weight (O, C, KH, KW) as the matrix [O, KH*KW*C] (a view when the
// weight is channels_last).
at::Tensor weight_matrix(const at::Tensor& weight) {
  return weight.permute({0, 2, 3, 1}).reshape({weight.size(0), -1});
}

at::Tensor columns(
    const at::Tensor& x_nhwc,
    const Shape& s,
    const ConvGeometry& g) {
  at::Tensor col = at::empty({s.rows(), s.cols()}, x_nhwc.options());
  im2col(x_nhwc.const_data_ptr<float>(), col.mutable_data_ptr<float>(), s, g);
  return col;
}

// A channels_last (N, O, OH, OW) tensor and its storage as [N*OH*OW, O].
std::pair<at::Tensor, at::Tensor> nhwc_output(
    const Shape& s,
    std::int64_t out_channels,
    const at::TensorOptions& options) {
  at::Tensor out = at::empty(
      {s.n, out_channels, s.oh, s.ow},
      options.memory_format(at::MemoryFormat::ChannelsLast));
  at::Tensor matrix = out.permute({0, 2, 3, 1}).view({s.rows(), out_channels});
  return {out, matrix};
}

ConvGeometry geometry_of(AutogradContext* ctx) {
  const auto v = ctx->saved_data["geometry"].toIntVector();
  return ConvGeometry{v[0], v[1], v[2], v[3]};
}

class GemmConv2dFunction
    : public torch::autograd::Function<GemmConv2dFunction> {
 public:
  static at::Tensor forward(
      AutogradContext* ctx,
      const at::Tensor& input,
      const at::Tensor& weight,
      const at::Tensor& bias, // empty: none
      const ConvGeometry& g) {
    const at::Tensor x = nhwc(input);
    const Shape s = shape_of(x, weight.size(2), weight.size(3), g);
    const at::Tensor col = columns(x, s, g);
    const at::Tensor w = weight_matrix(weight);
    auto [out, matrix] = nhwc_output(s, weight.size(0), x.options());
    const bool has_bias = bias.numel() > 0;
    if (has_bias) {
      at::addmm_out(matrix, bias, col, w.t());
    } else {
      at::mm_out(matrix, col, w.t());
    }
    ctx->save_for_backward({x, weight});
    ctx->saved_data["geometry"] =
        std::vector<std::int64_t>{g.stride_h, g.stride_w, g.pad_h, g.pad_w};
    ctx->saved_data["bias"] = has_bias;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const ConvGeometry g = geometry_of(ctx);
    const Shape s = shape_of(x, weight.size(2), weight.size(3), g);
    const std::int64_t out_channels = weight.size(0);
    const at::Tensor dy =
        nhwc(grads[0]).permute({0, 2, 3, 1}).reshape({s.rows(), out_channels});
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor dcol = at::mm(dy, weight_matrix(weight));
      dx = at::empty(
          {s.n, s.c, s.h, s.w},
          x.options().memory_format(at::MemoryFormat::ChannelsLast));
      col2im(dcol.const_data_ptr<float>(), dx.mutable_data_ptr<float>(), s, g);
    }
    if (ctx->needs_input_grad(1)) {
      const at::Tensor dwm = at::mm(dy.t(), columns(x, s, g));
      // [O, KH, KW, C] -> (O, C, KH, KW) with channels_last strides.
      dw = dwm.view({out_channels, s.kh, s.kw, s.c}).permute({0, 3, 1, 2});
    }
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) {
      db = dy.sum(0);
    }
    return {dx, dw, db, at::Tensor()};
  }
};

} // namespace

at::Tensor im2col_nhwc(
    const at::Tensor& input_nhwc,
    std::int64_t kernel_h,
    std::int64_t kernel_w,
    const ConvGeometry& geometry) {
  const at::Tensor x = nhwc(input_nhwc);
  return columns(x, shape_of(x, kernel_h, kernel_w, geometry), geometry);
}

at::Tensor gemm_conv2d(
    const at::Tensor& input,
    const at::Tensor& weight,
    const at::Tensor& bias,
    const ConvGeometry& geometry) {
  TORCH_CHECK(
      input.dim() == 4 && weight.dim() == 4 && input.device().is_cpu() &&
          input.scalar_type() == at::kFloat &&
          weight.scalar_type() == at::kFloat && input.size(1) == weight.size(1),
      "gemm_conv2d: expected a 4-D fp32 CPU input (N, C, H, W) and a weight (O, C, KH, KW); got ",
      input.sizes(),
      " ",
      input.scalar_type(),
      " and ",
      weight.sizes(),
      " ",
      weight.scalar_type());
  // Custom functions take defined tensors only: no bias is an empty one.
  return GemmConv2dFunction::apply(
      input,
      weight,
      bias.defined() ? bias : at::empty({0}, weight.options()),
      geometry);
}

} // namespace hotloop::model
