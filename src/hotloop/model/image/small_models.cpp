#include "hotloop/model/image/small_models.h"

#include "hotloop/model/batch_norm.h"
#include "hotloop/model/conv2d.h"

#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/flatten.h>
#include <ATen/ops/relu.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

namespace hotloop::model {

namespace nn = torch::nn;

Mlp::Mlp(std::int64_t in_features, std::int64_t num_classes)
    : hidden_(register_module("hidden", nn::Linear(in_features, 256))),
      fc_(register_module("fc", nn::Linear(256, num_classes))) {}

at::Tensor Mlp::forward(const at::Tensor& images) {
  return fc_(at::relu(hidden_(at::flatten(images, 1))));
}

double Mlp::training_flops_per_sample() const {
  const auto in = static_cast<double>(hidden_->options.in_features());
  const auto k = static_cast<double>(fc_->options.out_features());
  return 3 * 2 * (in * 256 + 256 * k);
}

CnnSmall::CnnSmall(
    std::int64_t in_channels,
    std::int64_t num_classes,
    std::int64_t image_size)
    : in_channels_(in_channels),
      num_classes_(num_classes),
      image_size_(image_size) {
  // One flat Sequential (LibTorch cannot nest them): features.0 is the first
  // convolution, features.1 its BatchNorm, and so on.
  nn::Sequential features;
  const std::int64_t widths[] = {in_channels, 32, 64};
  for (int b = 0; b < 2; ++b) {
    features->push_back(Conv2d(
        nn::Conv2dOptions(widths[b], widths[b + 1], 3).padding(1).bias(false)));
    features->push_back(BatchNorm2d(widths[b + 1]));
    features->push_back(nn::ReLU(nn::ReLUOptions().inplace(true)));
    features->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  }
  features_ = register_module("features", features);
  hidden_ = register_module("hidden", nn::Linear(64 * 7 * 7, 128));
  fc_ = register_module("fc", nn::Linear(128, num_classes));
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
}

at::Tensor CnnSmall::forward(const at::Tensor& images) {
  // (B, 64, H/4, W/4) -> (B, 64, 7, 7): the identity at 28 px.
  at::Tensor x = at::adaptive_avg_pool2d(features_->forward(images), {7, 7});
  x = at::relu(hidden_(at::flatten(x, 1)));
  return fc_(at::dropout(x, 0.3, is_training()));
}

double CnnSmall::training_flops_per_sample() const {
  // 3x3 convolutions at full size (in -> 32) and after one 2x2 max-pool
  // (32 -> 64), then Linear(3136, 128) and Linear(128, K). Pooling, BatchNorm
  // and ReLU are not counted (as in PaLM's and nanoGPT's MFU).
  const auto h = static_cast<double>(image_size_);
  const auto h2 = static_cast<double>(image_size_ / 2);
  const double forward =
      2.0 * static_cast<double>(in_channels_) * 32 * 9 * h * h +
      2.0 * 32 * 64 * 9 * h2 * h2 + 2.0 * 3136 * 128 +
      2.0 * 128 * static_cast<double>(num_classes_);
  return 3 * forward;
}

} // namespace hotloop::model
