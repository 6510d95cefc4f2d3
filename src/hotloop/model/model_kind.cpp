#include "hotloop/model/model_kind.h"

#include "hotloop/model/family.h"

namespace hotloop::model {

ModelKind model_kind(const std::string& name) {
  for (const ModelFamilyEntry& f : model_families()) {
    if (!f.prefix.empty() && name.starts_with(f.prefix)) {
      return {f.family, name.substr(f.prefix.size())};
    }
  }
  const FoundModel found = find_named_model(name);
  return found.family != nullptr ? ModelKind{found.family->family, {}}
                                 : ModelKind{};
}

} // namespace hotloop::model
