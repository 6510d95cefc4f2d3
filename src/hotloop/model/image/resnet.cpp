#include "hotloop/model/image/resnet.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/flatten.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/relu.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include "hotloop/errors.h"
#include "hotloop/model/activation_checkpoint.h"

namespace hotloop::model {

namespace {

namespace nn = torch::nn;

Conv2d conv(
    std::int64_t in,
    std::int64_t out,
    std::int64_t kernel,
    std::int64_t stride) {
  return Conv2d(nn::Conv2dOptions(in, out, kernel)
                    .stride(stride)
                    .padding(kernel / 2)
                    .bias(false));
}

// torchvision's BasicBlock: two 3x3 convolutions.
class BasicBlock : public nn::Module {
 public:
  static constexpr std::int64_t kExpansion = 1;
  BasicBlock(
      std::int64_t in,
      std::int64_t planes,
      std::int64_t stride,
      nn::Sequential downsample)
      : conv1_(register_module("conv1", conv(in, planes, 3, stride))),
        bn1_(register_module("bn1", BatchNorm2d(planes))),
        conv2_(register_module("conv2", conv(planes, planes, 3, 1))),
        bn2_(register_module("bn2", BatchNorm2d(planes))),
        downsample_(downsample) {
    if (downsample_) {
      register_module("downsample", downsample_);
    }
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor out = at::relu(bn1_(conv1_(x)));
    out = bn2_(conv2_(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return at::relu(out);
  }
  BatchNorm2d& last_bn() {
    return bn2_;
  }

 private:
  Conv2d conv1_;
  BatchNorm2d bn1_;
  Conv2d conv2_;
  BatchNorm2d bn2_;
  nn::Sequential downsample_;
};

// torchvision's Bottleneck (ResNet v1.5: the stride is on the 3x3).
class Bottleneck : public nn::Module {
 public:
  static constexpr std::int64_t kExpansion = 4;
  Bottleneck(
      std::int64_t in,
      std::int64_t planes,
      std::int64_t stride,
      nn::Sequential downsample)
      : conv1_(register_module("conv1", conv(in, planes, 1, 1))),
        bn1_(register_module("bn1", BatchNorm2d(planes))),
        conv2_(register_module("conv2", conv(planes, planes, 3, stride))),
        bn2_(register_module("bn2", BatchNorm2d(planes))),
        conv3_(
            register_module("conv3", conv(planes, planes * kExpansion, 1, 1))),
        bn3_(register_module("bn3", BatchNorm2d(planes * kExpansion))),
        downsample_(downsample) {
    if (downsample_) {
      register_module("downsample", downsample_);
    }
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor out = at::relu(bn1_(conv1_(x)));
    out = at::relu(bn2_(conv2_(out)));
    out = bn3_(conv3_(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return at::relu(out);
  }
  BatchNorm2d& last_bn() {
    return bn3_;
  }

 private:
  Conv2d conv1_;
  BatchNorm2d bn1_;
  Conv2d conv2_;
  BatchNorm2d bn2_;
  Conv2d conv3_;
  BatchNorm2d bn3_;
  nn::Sequential downsample_;
};

template <typename Block>
nn::Sequential make_stage(
    std::int64_t& in,
    std::int64_t planes,
    int blocks,
    std::int64_t stride) {
  nn::Sequential stage;
  for (int b = 0; b < blocks; ++b) {
    const std::int64_t s = b == 0 ? stride : 1;
    nn::Sequential downsample{nullptr};
    if (b == 0 && (s != 1 || in != planes * Block::kExpansion)) {
      downsample = nn::Sequential(
          conv(in, planes * Block::kExpansion, 1, s),
          BatchNorm2d(planes * Block::kExpansion));
    }
    stage->push_back(std::make_shared<Block>(in, planes, s, downsample));
    in = planes * Block::kExpansion;
  }
  return stage;
}

// Residual blocks per stage (layer1..layer4) for a depth.
const int* stage_blocks(int depth) {
  static constexpr int k18[] = {2, 2, 2, 2};
  static constexpr int k34_50[] = {3, 4, 6, 3};
  switch (depth) {
    case 18:
      return k18;
    case 34:
    case 50:
      return k34_50;
    default:
      throw UsageError(
          fmt::format("ResNet depth {} is not built (18, 34, 50 are)", depth));
  }
}

} // namespace

ResNet::ResNet(const ResNetOptions& options) : options_(options) {
  const int* blocks = stage_blocks(options.depth);
  conv1_ = register_module(
      "conv1",
      options.small_stem ? conv(options.in_channels, 64, 3, 1)
                         : conv(options.in_channels, 64, 7, 2));
  bn1_ = register_module("bn1", BatchNorm2d(64));
  std::int64_t in = 64;
  const std::int64_t planes[] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    const std::int64_t stride = s == 0 ? 1 : 2;
    nn::Sequential stage = options.depth == 50
        ? make_stage<Bottleneck>(in, planes[s], blocks[s], stride)
        : make_stage<BasicBlock>(in, planes[s], blocks[s], stride);
    stages_.push_back(register_module(fmt::format("layer{}", s + 1), stage));
  }
  fc_ = register_module("fc", nn::Linear(in, options.num_classes));

  // torchvision's initialization: Kaiming normal (fan_out) for convolutions,
  // BatchNorm at (1, 0), the Linear layer's default.
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = m->as<BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
  if (options.zero_init_residual) {
    for (auto& stage : stages_) {
      for (auto& child : stage->children()) {
        if (auto* b = dynamic_cast<BasicBlock*>(child.get())) {
          nn::init::zeros_(b->last_bn()->weight);
        } else if (auto* b3 = dynamic_cast<Bottleneck*>(child.get())) {
          nn::init::zeros_(b3->last_bn()->weight);
        }
      }
    }
  }
}

double ResNet::training_flops_per_sample() const {
  // The output side of a k x k convolution (padding k / 2) with `stride`.
  const auto side = [](std::int64_t h, std::int64_t k, std::int64_t stride) {
    return (h + 2 * (k / 2) - k) / stride + 1;
  };
  const auto conv = [](std::int64_t in,
                       std::int64_t out,
                       std::int64_t k,
                       std::int64_t h_out) {
    return 2.0 * static_cast<double>(in * out * k * k) *
        static_cast<double>(h_out * h_out);
  };
  const bool bottleneck = options_.depth == 50;
  const int* blocks = stage_blocks(options_.depth);
  double f = 0;
  std::int64_t h = options_.image_size;
  if (options_.small_stem) {
    f += conv(options_.in_channels, 64, 3, h);
  } else {
    h = side(h, 7, 2);
    f += conv(options_.in_channels, 64, 7, h);
    h = side(h, 3, 2); // the 3x3 max-pool, stride 2, padding 1
  }
  std::int64_t in = 64;
  const std::int64_t planes[] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const std::int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      const std::int64_t p = planes[s];
      const std::int64_t out = bottleneck ? 4 * p : p;
      const std::int64_t h_out = side(h, 3, stride);
      if (bottleneck) {
        f += conv(in, p, 1, h) + conv(p, p, 3, h_out) + conv(p, out, 1, h_out);
      } else {
        f += conv(in, p, 3, h_out) + conv(p, p, 3, h_out);
      }
      if (b == 0 && (stride != 1 || in != out)) {
        f += conv(in, out, 1, h_out); // the downsample
      }
      in = out;
      h = h_out;
    }
  }
  f += 2.0 * static_cast<double>(in * options_.num_classes);
  return 3 * f;
}

at::Tensor ResNet::stem(const at::Tensor& images) {
  at::Tensor x = at::relu(bn1_(conv1_(images)));
  if (!options_.small_stem) {
    x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  }
  return x;
}

at::Tensor ResNet::head(const at::Tensor& features) {
  return fc_(at::flatten(at::adaptive_avg_pool2d(features, {1, 1}), 1));
}

std::vector<std::shared_ptr<torch::nn::Module>> ResNet::shard_units() const {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  for (const auto& stage : stages_) {
    out.push_back(stage.ptr());
  }
  return out;
}

at::Tensor ResNet::forward(const at::Tensor& images) {
  if (checkpointing_ == Checkpointing::None) {
    at::Tensor x = stem(images);
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      x = run_unit(i, [&] { return stages_[i]->forward(x); });
    }
    return head(x);
  }
  at::Tensor x = checkpointing_ == Checkpointing::All
      ? checkpoint(
            *this,
            [](torch::nn::Module& m, const at::Tensor& in) {
              return static_cast<ResNet&>(m).stem(in);
            },
            images)
      : stem(images);
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    x = run_unit(i, [&] { return checkpointed_stage(i, x); });
  }
  return head(x);
}

at::Tensor ResNet::checkpointed_stage(std::size_t i, at::Tensor x) {
  if (checkpointing_ != Checkpointing::Blocks) {
    return checkpoint(
        *stages_[i],
        [](torch::nn::Module& m, const at::Tensor& in) {
          return static_cast<torch::nn::SequentialImpl&>(m).forward(in);
        },
        x);
  }
  for (const auto& block : stages_[i]->children()) {
    x = checkpoint(
        *block,
        [](torch::nn::Module& m, const at::Tensor& in) {
          if (auto* basic = dynamic_cast<BasicBlock*>(&m)) {
            return basic->forward(in);
          }
          return dynamic_cast<Bottleneck&>(m).forward(in);
        },
        x);
  }
  return x;
}

} // namespace hotloop::model
