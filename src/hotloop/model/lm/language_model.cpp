#include "hotloop/model/lm/language_model.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/model_kind.h"

namespace hotloop::model {

const std::vector<std::string>& language_model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    std::copy_if(
        model_names().begin(),
        model_names().end(),
        std::back_inserter(n),
        [](const std::string& name) {
          return model_kind(name).language_model();
        });
    return n;
  }();
  return names;
}

ModelOptions resolve_language_model(
    const ModelOptions& options,
    const ModelKind& kind) {
  if (!kind.language_model()) {
    throw UsageError(
        fmt::format("--model {}: not a language model", options.name));
  }
  return family_entry(kind.family).resolve(options, kind);
}

ModelOptions resolve_language_model(const ModelOptions& options) {
  return resolve_language_model(options, model_kind(options.name));
}

std::shared_ptr<LanguageModel> make_language_model(const ModelOptions& o) {
  const ModelKind kind = model_kind(o.name);
  if (!kind.language_model()) {
    throw UsageError(fmt::format("--model {}: not a language model", o.name));
  }
  // A named size or a folder: its family's entry builds it.
  return std::static_pointer_cast<LanguageModel>(
      family_entry(kind.family).make(o, kind));
}

} // namespace hotloop::model
