#pragma once
// The families' Hugging Face adapters: the Llama family's weights for a
// folder and how a family's make and write are built (the config.json
// readers are model/lm/hf_configs.h). hf_checkpoint.cpp
// picks the family by the file's architecture.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/hf_configs.h"
#include "hotloop/model/weights.h"

namespace hotloop::model::lm {

// A Llama's weights as Hugging Face names them (its own), float32 on the
// CPU. UsageError for biases on q/k/v but not on o_proj in the Llama
// architecture: its config.json cannot say so.
StateDict hf_llama_weights(const Llama& model);

// A family's HfAdapter::make and HfAdapter::write for its model class `M`,
// built from its `Config` (what its HfAdapter::read keeps): `config` and
// `weights` give the folder's two files for one of its models.
template <typename M, typename Config>
void set_hf_model(
    HfAdapter& hf,
    std::string (*config)(const Config&),
    StateDict (*weights)(const M&)) {
  hf.make = [](const HfModelConfig& c) -> std::shared_ptr<LanguageModel> {
    return std::make_shared<M>(c.template as<Config>());
  };
  hf.write = [config, weights](
                 const LanguageModel& model) -> std::optional<HfFolderFiles> {
    const auto* m = dynamic_cast<const M*>(&model);
    if (m == nullptr) {
      return std::nullopt;
    }
    return HfFolderFiles{config(m->config()), weights(*m)};
  };
}

} // namespace hotloop::model::lm
