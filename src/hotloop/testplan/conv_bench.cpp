#include "hotloop/testplan/conv_bench.h"

#include <algorithm>
#include <chrono>

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/randn.h>
#include <fmt/format.h>

#include "hotloop/core/cpus.h"
#include "hotloop/errors.h"
#include "hotloop/model/conv2d.h"

namespace hotloop::testplan {

namespace {

struct Shape {
  std::string layer;
  std::int64_t in_channels, out_channels, kernel, stride, in_size;
};

// A ResNet-18/34 with the -small stem on size x size inputs: per stage, its
// 3x3 convolution and, from layer2 on, the strided entry and its 1x1
// downsample.
std::vector<Shape> resnet_small_shapes(std::int64_t size) {
  std::vector<Shape> shapes;
  std::int64_t map = size;
  std::int64_t channels = 64;
  for (int stage = 1; stage <= 4; ++stage) {
    const std::string name = fmt::format("layer{}", stage);
    if (stage > 1) {
      shapes.push_back(
          {name + " entry 3x3/2", channels, 2 * channels, 3, 2, map});
      shapes.push_back(
          {name + " downsample 1x1/2", channels, 2 * channels, 1, 2, map});
      channels *= 2;
      map = (map + 1) / 2;
    }
    shapes.push_back({name + " 3x3", channels, channels, 3, 1, map});
  }
  return shapes;
}

// Median milliseconds of forward + backward (input and weight gradients).
double time_pass(
    model::Conv2d& conv,
    const at::Tensor& input,
    const at::Tensor& grad,
    int repeats) {
  std::vector<double> ms;
  for (int i = 0; i < repeats + 2; ++i) { // two untimed warm-up passes
    conv->zero_grad();
    at::Tensor x = input.detach().requires_grad_();
    const auto t0 = std::chrono::steady_clock::now();
    conv(x).backward(grad);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 2) {
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

} // namespace

ConvBenchResult bench_conv(const ConvBenchOptions& options) {
  if (options.batch < 1 || options.size < 8 || options.repeats < 1) {
    throw UsageError(fmt::format(
        "bench conv: --batch {}, --size {}, --repeats {}: need a batch and repeats of at least 1 and a size of at least 8",
        options.batch,
        options.size,
        options.repeats));
  }
  ConvBenchResult r;
  r.options = options;
  r.threads =
      options.threads > 0 ? options.threads : static_cast<int>(usable_cpus());
  at::set_num_threads(r.threads);
  const auto cl = at::MemoryFormat::ChannelsLast;
  for (const Shape& s : resnet_small_shapes(options.size)) {
    model::Conv2d conv(
        torch::nn::Conv2dOptions(s.in_channels, s.out_channels, s.kernel)
            .stride(s.stride)
            .padding(s.kernel / 2)
            .bias(false));
    conv->weight.set_data(conv->weight.contiguous(cl));
    const at::Tensor x =
        at::randn({options.batch, s.in_channels, s.in_size, s.in_size})
            .contiguous(cl);
    ConvBenchRow row{
        s.layer, s.in_channels, s.out_channels, s.kernel, s.stride, s.in_size};
    row.auto_takes_gemm = conv->uses_gemm(x);
    const at::Tensor grad = at::randn_like(conv(x).detach());
    row.out_size = grad.size(2);
    conv->set_cpu_conv(model::CpuConv::OneDnn);
    row.onednn_ms = time_pass(conv, x, grad, options.repeats);
    conv->set_cpu_conv(model::CpuConv::Gemm);
    row.gemm_ms = time_pass(conv, x, grad, options.repeats);
    r.rows.push_back(row);
  }
  return r;
}

nlohmann::json to_json(const ConvBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    rows.push_back(
        {{"layer", row.layer},
         {"in_channels", row.in_channels},
         {"out_channels", row.out_channels},
         {"kernel", row.kernel},
         {"stride", row.stride},
         {"in_size", row.in_size},
         {"out_size", row.out_size},
         {"onednn_ms", row.onednn_ms},
         {"gemm_ms", row.gemm_ms},
         {"gemm_speedup", row.onednn_ms / row.gemm_ms},
         {"auto_takes", row.auto_takes_gemm ? "gemm" : "onednn"}});
  }
  return {
      {"batch", r.options.batch},
      {"size", r.options.size},
      {"threads", r.threads},
      {"repeats", r.options.repeats},
      {"measures",
       "median ms of one forward + backward (input and weight gradients), fp32, channels_last"},
      {"rows", rows}};
}

std::string render(const ConvBenchResult& r) {
  std::string out = fmt::format(
      "forward + backward, fp32 channels_last, batch {}, {} thread(s), median of {}\n"
      "{:<24} {:>10} {:>7} {:>10} {:>9} {:>8}  {}\n",
      r.options.batch,
      r.threads,
      r.options.repeats,
      "layer",
      "channels",
      "map",
      "oneDNN ms",
      "GEMM ms",
      "speedup",
      "auto takes");
  for (const auto& row : r.rows) {
    out += fmt::format(
        "{:<24} {:>10} {:>7} {:>10.2f} {:>9.2f} {:>7.2f}x  {}\n",
        row.layer,
        fmt::format("{}->{}", row.in_channels, row.out_channels),
        fmt::format("{}->{}", row.in_size, row.out_size),
        row.onednn_ms,
        row.gemm_ms,
        row.onednn_ms / row.gemm_ms,
        row.auto_takes_gemm ? "gemm" : "oneDNN");
  }
  return out;
}

} // namespace hotloop::testplan
