// hotloop's models: torchvision's names, shapes and parameter counts, the
// -small stem, zero-init-residual, and the factory's errors.
#include <gtest/gtest.h>

#include <algorithm>

#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/weights.h"

namespace hotloop::model {
namespace {

std::shared_ptr<Model> make(
    const std::string& name,
    std::int64_t classes = 1000,
    std::int64_t channels = 3) {
  torch::manual_seed(0);
  return make_model(
      ModelOptions().set_name(name).set_num_classes(classes).set_in_channels(
          channels));
}

std::map<std::string, std::vector<std::int64_t>> shapes(const Model& m) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& [name, t] : state_dict(m)) {
    out[name] = t.sizes().vec();
  }
  return out;
}

} // namespace

// The counts torchvision 0.26 gives: len(resnetN().state_dict()) and
// sum(p.numel() for p in resnetN().parameters()).
TEST(Models, ResNetsHaveTorchvisionsKeysAndParameterCounts) {
  const struct {
    const char* name;
    std::size_t keys;
    std::int64_t parameters;
  } cases[] = {
      {"resnet18", 122, 11'689'512},
      {"resnet34", 218, 21'797'672},
      {"resnet50", 320, 25'557'032}};
  for (const auto& c : cases) {
    const auto m = make(c.name);
    const auto s = shapes(*m);
    EXPECT_EQ(s.size(), c.keys) << c.name;
    EXPECT_EQ(count_parameters(*m).trainable, c.parameters) << c.name;
    EXPECT_EQ(s.at("conv1.weight"), (std::vector<std::int64_t>{64, 3, 7, 7}))
        << c.name;
    EXPECT_TRUE(s.contains("layer2.0.downsample.0.weight")) << c.name;
    EXPECT_TRUE(s.contains("layer4.1.bn2.num_batches_tracked")) << c.name;
    EXPECT_EQ(s.at("fc.weight")[0], 1000) << c.name;
  }
  EXPECT_TRUE(
      shapes(*make("resnet50")).contains("layer1.0.downsample.1.running_var"));
  EXPECT_FALSE(
      shapes(*make("resnet18")).contains("layer1.0.downsample.0.weight"));
}

TEST(Models, SmallStemIsOneThreeByThreeConvolutionAndKeepsTheResolution) {
  const auto m = make("resnet18-small", 10, 1);
  EXPECT_EQ(
      shapes(*m).at("conv1.weight"), (std::vector<std::int64_t>{64, 1, 3, 3}));
  EXPECT_EQ(shapes(*m).size(), 122u);
  m->eval();
  const at::Tensor logits = m->forward(at::randn({2, 1, 28, 28}));
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{2, 10}));
}

TEST(Models, EveryModelMapsABatchToLogits) {
  for (const auto& name : model_names()) {
    if (name == "resnet34" || name == "resnet50" || name == "resnet34-small" ||
        name == "resnet50-small") {
      continue; // covered by the parity test; slow on two cores
    }
    if (model_kind(name).language_model()) {
      continue; // test_gpt.cpp, test_llama.cpp
    }
    torch::manual_seed(0);
    const auto m = make_model(ModelOptions()
                                  .set_name(name)
                                  .set_num_classes(7)
                                  .set_in_channels(1)
                                  .set_image_size(28));
    m->eval();
    EXPECT_EQ(
        m->forward(at::randn({3, 1, 28, 28})).sizes(), (at::IntArrayRef{3, 7}))
        << name;
    EXPECT_EQ(m->head_name(), "fc");
  }
}

TEST(Models, ZeroInitResidualZeroesTheLastBatchNormOfEachBlockOnly) {
  torch::manual_seed(0);
  const auto m = make_model(
      ModelOptions().set_name("resnet50").set_zero_init_residual(true));
  for (const auto& [name, t] : state_dict(*m)) {
    if (name.ends_with("bn3.weight")) {
      EXPECT_EQ(t.abs().sum().item<float>(), 0.0f) << name;
    } else if (name.ends_with("bn2.weight") || name == "bn1.weight") {
      EXPECT_EQ(t.min().item<float>(), 1.0f) << name;
    }
  }
}

TEST(Models, UnknownModelOrBadSizesAreUsageErrorsNamingTheChoices) {
  try {
    make_model(ModelOptions().set_name("resnet19"));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("--model resnet19"), std::string::npos);
    EXPECT_NE(e.hint().find("resnet18-small"), std::string::npos);
  }
  EXPECT_THROW(make_model(ModelOptions().set_num_classes(0)), UsageError);
  EXPECT_THROW(make_model(ModelOptions().set_in_channels(0)), UsageError);
}

TEST(ModelKind, EachNameIsItsFamilyAndAFolderOrFileItsPath) {
  EXPECT_EQ(model_kind("resnet18-small").family, ModelFamily::Image);
  EXPECT_EQ(model_kind("mlp").family, ModelFamily::Image);
  EXPECT_EQ(model_kind("gpt2").family, ModelFamily::Gpt);
  EXPECT_EQ(model_kind("llama-nano").family, ModelFamily::Llama);
  EXPECT_EQ(model_kind("smollm2-135m").family, ModelFamily::Llama);
  const ModelKind folder = model_kind("hf:/some/folder");
  EXPECT_EQ(folder.family, ModelFamily::HfFolder);
  EXPECT_EQ(folder.folder(), "/some/folder");
  EXPECT_TRUE(folder.language_model());
  const ModelKind exported = model_kind("torchscript:dir/m.pt");
  EXPECT_TRUE(exported.exported());
  EXPECT_EQ(exported.path, "dir/m.pt");
  EXPECT_EQ(exported.folder(), ""); // a folder only for hf:DIR
  EXPECT_FALSE(exported.language_model());
  EXPECT_EQ(model_kind("resnet19").family, ModelFamily::Unknown);
  EXPECT_EQ(model_kind("").family, ModelFamily::Unknown);
  // Every built-in name has a family: model_names() and the kinds agree.
  for (const std::string& name : model_names()) {
    EXPECT_NE(model_kind(name).family, ModelFamily::Unknown) << name;
    EXPECT_EQ(
        model_kind(name).language_model(),
        std::find(
            language_model_names().begin(),
            language_model_names().end(),
            name) != language_model_names().end())
        << name;
  }
}

} // namespace hotloop::model
