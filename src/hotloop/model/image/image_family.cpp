// The image classifiers' entry: the fast models for tests and the CPU
// (model/image/small_models.h) and torchvision's ResNets
// (model/image/resnet.h), each with the recipe it trains with (train/recipe.h).

#include "hotloop/model/families.h"
#include "hotloop/model/image/resnet.h"
#include "hotloop/model/image/small_models.h"
#include "hotloop/model/model.h"

namespace hotloop::model {

namespace {

// AdamW's peak rate for mlp and cnn-small; the ResNets train with SGD at
// 0.1 x batch / 128 (Goyal et al.'s linear scaling rule).
constexpr SizeRecipe kMlp{1e-3, false, false};
constexpr SizeRecipe kCnnSmall{3e-3, false, false};
constexpr SizeRecipe kResNet{1e-3, false, true};

std::shared_ptr<Model> make_image_model(const ModelOptions& o) {
  if (o.name == "mlp") {
    return std::make_shared<Mlp>(
        o.image.in_channels * o.image.size * o.image.size, o.image.num_classes);
  }
  if (o.name == "cnn-small") {
    return std::make_shared<CnnSmall>(
        o.image.in_channels, o.image.num_classes, o.image.size);
  }
  ResNetOptions r;
  r.small_stem = o.name.ends_with("-small");
  r.depth = std::stoi(o.name.substr(std::string("resnet").size(), 2));
  r.num_classes = o.image.num_classes;
  r.in_channels = o.image.in_channels;
  r.zero_init_residual = o.image.zero_init_residual;
  r.image_size = o.image.size;
  return std::make_shared<ResNet>(r);
}

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
  e.make = [](const ModelOptions& o, const ModelKind&) {
    return make_image_model(o);
  };
  return e;
}

} // namespace hotloop::model
