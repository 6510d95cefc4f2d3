#pragma once
// ResNet-18/34/50 with torchvision's structure and parameter names (conv1, bn1,
// layer1.0.conv1, layer1.0.downsample.0, ..., fc), so a torchvision
// state_dict loads without renaming; and the -small stem for 28-64 px inputs.

#include <cstdint>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "hotloop/model/batch_norm.h"
#include "hotloop/model/conv2d.h"
#include "hotloop/model/model.h"
#include "hotloop/model/shard_units.h"

namespace hotloop::model {

struct ResNetOptions {
  int depth = 18; // 18, 34 or 50
  bool small_stem = false; // conv1 3x3 stride 1, no max-pool
  std::int64_t num_classes = 1000;
  std::int64_t in_channels = 3;
  bool zero_init_residual = false;
  std::int64_t image_size = 224; // the inputs' side, for the FLOP count only
};

class ResNet : public Model, public ShardUnits {
 public:
  explicit ResNet(const ResNetOptions& options);
  at::Tensor forward(const at::Tensor& images) override;
  void set_checkpointing(Checkpointing mode) override {
    checkpointing_ = mode;
  }
  // 3x the forward's convolutions and the classifier at image_size (BatchNorm,
  // ReLU, pooling and the residual adds not counted).
  double training_flops_per_sample() const override;
  // --shard 3: the four residual stages (the stem and the classifier stay
  // whole).
  std::vector<std::shared_ptr<torch::nn::Module>> shard_units() const override;
  // The four residual stages (layer1..layer4), for activation checkpointing.
  std::vector<torch::nn::Sequential>& stages() {
    return stages_;
  }
  // Everything before the stages and after them, so a caller can run the
  // stages itself.
  at::Tensor stem(const at::Tensor& images);
  at::Tensor head(const at::Tensor& features);

 private:
  // Stage i with its activations recomputed in backward (checkpointing_:
  // the whole stage, or each block).
  at::Tensor checkpointed_stage(std::size_t i, at::Tensor x);

  ResNetOptions options_;
  Checkpointing checkpointing_ = Checkpointing::None;
  Conv2d conv1_{nullptr};
  BatchNorm2d bn1_{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  torch::nn::Linear fc_{nullptr};
};

} // namespace hotloop::model
