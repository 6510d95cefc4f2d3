// The exported models' entry: `--model torchscript:FILE`, a module saved
// from Python (model/script/exported.h), trained like the built-in ones.

#include "hotloop/model/families.h"
#include "hotloop/model/script/exported.h"

namespace hotloop::model {

ModelFamilyEntry exported_family() {
  ModelFamilyEntry e(
      ModelFamily::Exported,
      "TorchScript exports",
      "a module torch.jit.script or trace saved from Python");
  e.prefix = kTorchScriptPrefix;
  e.form = "torchscript:FILE";
  e.checkpointing = "none (one graph hotloop cannot split)";
  return e;
}

} // namespace hotloop::model
