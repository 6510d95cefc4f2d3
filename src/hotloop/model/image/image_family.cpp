// The image classifiers' entry: the fast models for tests and the CPU
// (model/image/small_models.h) and torchvision's ResNets
// (model/image/resnet.h), each with the recipe it trains with (train/recipe.h).

#include "hotloop/model/families.h"

namespace hotloop::model {

namespace {

// AdamW's peak rate for mlp and cnn-small; the ResNets train with SGD at
// 0.1 x batch / 128 (Goyal et al.'s linear scaling rule).
constexpr SizeRecipe kMlp{1e-3, false, false};
constexpr SizeRecipe kCnnSmall{3e-3, false, false};
constexpr SizeRecipe kResNet{1e-3, false, true};

} // namespace

ModelFamilyEntry image_family() {
  ModelFamilyEntry e(
      ModelFamily::Image,
      "image classifiers",
      "classifiers of C x H x W images (--in-channels, --size, --num-classes)");
  e.sizes = {
      {"mlp", "flatten, one hidden layer of 256, ReLU", kMlp},
      {"cnn-small",
       "two conv-BN-ReLU-pool blocks (32, 64), 128 hidden",
       kCnnSmall},
      {"resnet18", "torchvision's ResNet-18 (its state_dict loads)", kResNet},
      {"resnet34", "torchvision's ResNet-34", kResNet},
      {"resnet50", "torchvision's ResNet-50 (bottleneck blocks)", kResNet},
      {"resnet18-small",
       "ResNet-18 with a 3x3 stem for 28-64 px images",
       kResNet},
      {"resnet34-small", "ResNet-34 with a 3x3 stem", kResNet},
      {"resnet50-small", "ResNet-50 with a 3x3 stem", kResNet}};
  e.checkpointing =
      "the ResNets: stages (each stage), all (the stem too) or blocks (each residual block); mlp and cnn-small: none";
  return e;
}

} // namespace hotloop::model
