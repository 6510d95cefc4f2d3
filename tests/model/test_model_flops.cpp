// The built-in models' analytic training FLOPs (for MFU) against LibTorch's
// profiler, which counts the FLOPs of each matrix product and convolution
// from its input shapes: the analytic count of a forward must equal the
// profiler's for one sample, and so must hotloop's own operator count
// (telemetry/op_flops.h, which exported models use).

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "hotloop/model/model.h"
#include "hotloop/telemetry/op_flops.h"
#include "hotloop/telemetry/profiler.h"

namespace hotloop::model {
namespace {

double profiled_forward(Model& m, const at::Tensor& input) {
  m.eval();
  torch::NoGradGuard no_grad;
  return telemetry::profiled_flops([&] { (void)m.forward(input); });
}

struct Case {
  std::string name;
  std::int64_t channels;
  std::int64_t size;
  std::int64_t classes;
};

TEST(ModelFlops, AnalyticCountsEqualTheProfilersForOneForward) {
  for (const Case& c :
       {Case{"mlp", 1, 28, 10},
        Case{"cnn-small", 1, 28, 10},
        Case{"cnn-small", 3, 32, 7},
        Case{"resnet18-small", 3, 32, 10},
        Case{"resnet18", 3, 64, 5},
        Case{"resnet34", 1, 48, 10},
        Case{"resnet50", 3, 64, 100}}) {
    SCOPED_TRACE(c.name + " at " + std::to_string(c.size));
    ModelOptions o;
    o.name = c.name;
    o.image.in_channels = c.channels;
    o.image.size = c.size;
    o.image.num_classes = c.classes;
    const auto m = make_model(o);
    const double analytic = m->training_flops_per_sample() / 3;
    ASSERT_GT(analytic, 0);
    const double profiled =
        profiled_forward(*m, at::zeros({1, c.channels, c.size, c.size}));
    // Exact integers on both sides.
    EXPECT_NEAR(profiled, analytic, 1e-9 * analytic);
    const double counted = telemetry::counted_flops([&] {
      (void)m->forward(at::zeros({1, c.channels, c.size, c.size}));
    });
    EXPECT_NEAR(counted, analytic, 1e-9 * analytic);
  }
}

} // namespace
} // namespace hotloop::model
