#include "hotloop/model/model_kind.h"

#include <algorithm>

#include "hotloop/model/exported.h"
#include "hotloop/model/gpt.h"
#include "hotloop/model/llama.h"

namespace hotloop::model {

namespace {

constexpr const char* kHfPrefix = "hf:";

} // namespace

const std::vector<std::string>& image_model_names() {
  static const std::vector<std::string> kNames = {
      "mlp",
      "cnn-small",
      "resnet18",
      "resnet34",
      "resnet50",
      "resnet18-small",
      "resnet34-small",
      "resnet50-small"};
  return kNames;
}

ModelKind model_kind(const std::string& name) {
  if (name.starts_with(kHfPrefix)) {
    return {ModelFamily::HfFolder, name.substr(std::string(kHfPrefix).size())};
  }
  if (name.starts_with(kTorchScriptPrefix)) {
    return {
        ModelFamily::Exported,
        name.substr(std::string(kTorchScriptPrefix).size())};
  }
  if (is_gpt(name)) {
    return {ModelFamily::Gpt, {}};
  }
  if (is_llama(name)) {
    return {ModelFamily::Llama, {}};
  }
  const auto& images = image_model_names();
  if (std::find(images.begin(), images.end(), name) != images.end()) {
    return {ModelFamily::Image, {}};
  }
  return {};
}

} // namespace hotloop::model
