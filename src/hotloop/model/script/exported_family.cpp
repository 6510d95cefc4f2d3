// The exported models' entry: `--model torchscript:FILE`, a module saved
// from Python (model/script/exported.h), trained like the built-in ones.

#include "hotloop/model/families.h"
#include "hotloop/model/model.h"
#include "hotloop/model/script/exported.h"

namespace hotloop::model {

namespace {

// An image model's shape, or a language model's context and vocabulary
// (options.lm.context > 0), to check the module against.
std::shared_ptr<Model> load(const ModelOptions& o, const ModelKind&) {
  ExportedOptions e;
  e.path = exported_path(o.name);
  e.head = o.exported.head;
  if (o.lm.context > 0) {
    e.context = o.lm.context;
    e.vocab = o.lm.vocab;
  } else {
    e.in_channels = o.image.in_channels;
    e.image_size = o.image.size;
    e.num_classes = o.image.num_classes;
  }
  return load_exported_model(e);
}

} // namespace

ModelFamilyEntry exported_family() {
  ModelFamilyEntry e(
      ModelFamily::Exported,
      "TorchScript exports",
      "a module torch.jit.script or trace saved from Python");
  e.prefix = kTorchScriptPrefix;
  e.form = "torchscript:FILE";
  e.checkpointing = "none (one graph hotloop cannot split)";
  e.make = load;
  return e;
}

} // namespace hotloop::model
