#pragma once
// `hotloop bench conv`: each convolution shape of a ResNet on small images
// (the -small stem: stage maps of S, S/2, S/4, S/8 pixels), forward +
// backward on the CPU through oneDNN and through im2col + GEMM
// (model/gemm_conv.h), and which one --cpu-conv auto picks. The evidence for
// auto's threshold, on the machine it runs on.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::testplan {

struct ConvBenchOptions {
  std::int64_t batch = 64;
  std::int64_t size = 28; // the input's height and width
  int threads = 0; // 0: the usable cores
  int repeats = 10; // timed forward + backward passes per shape and algorithm
};

struct ConvBenchRow {
  std::string layer; // "layer4 3x3", "layer4 entry 3x3/2", ...
  std::int64_t in_channels = 0, out_channels = 0, kernel = 0, stride = 0;
  std::int64_t in_size = 0, out_size = 0; // square maps
  double onednn_ms = 0; // median forward + backward
  double gemm_ms = 0;
  bool auto_takes_gemm = false;
};

struct ConvBenchResult {
  ConvBenchOptions options;
  int threads = 0;
  std::vector<ConvBenchRow> rows;
};

ConvBenchResult bench_conv(const ConvBenchOptions& options);
nlohmann::json to_json(const ConvBenchResult& r);
// A text table, one row per shape.
std::string render(const ConvBenchResult& r);

} // namespace hotloop::testplan
