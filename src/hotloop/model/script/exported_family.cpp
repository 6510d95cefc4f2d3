// The exported models' entry: `--model torchscript:FILE`, a module saved
// from Python (model/exported.h), trained like the built-in ones.

#include "../families.h"
#include "hotloop/model/exported.h"

namespace hotloop::model {

ModelFamilyEntry exported_family() {
  ModelFamilyEntry e;
  e.family = ModelFamily::Exported;
  e.title = "TorchScript exports";
  e.about = "a module torch.jit.script or trace saved from Python";
  e.prefix = kTorchScriptPrefix;
  e.form = "torchscript:FILE";
  e.checkpointing = "none (one graph hotloop cannot split)";
  return e;
}

} // namespace hotloop::model
