#pragma once
// Models exported from Python and trained by hotloop: `--model
// torchscript:FILE`. The loader sits behind this one interface (an
// ExportedModel is a Model like the built-in ones) so that another export
// format can take TorchScript's place; TorchScript is the one LibTorch 2.11
// can train (torch.export / AOTInductor packages run forward only in C++).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hotloop/model/model.h"

namespace hotloop::model {

inline constexpr const char* kTorchScriptPrefix = "torchscript:";

// Whether a --model value names an exported model: model_kind()
// (model_kind.h).
// FILE of "torchscript:FILE"; UsageError when it is empty.
std::string exported_path(const std::string& model_name);

// What a model file is, told by its bytes (not its name).
enum class ModelFileKind {
  TorchScript, // torch.jit.script / torch.jit.trace + save
  TorchExport, // torch.export.save / AOTInductor package (.pt2)
  StateDict, // torch.save() of tensors: weights without the code
  Safetensors, // weights without the code
  Other, // a zip or a file of something else
};
struct ModelFileFormat {
  ModelFileKind kind = ModelFileKind::Other;
  bool traced = false; // TorchScript from torch.jit.trace
  std::string description; // "TorchScript (traced)", "a torch.save() zip..."
};
// Throws DataError when the file cannot be read.
ModelFileFormat sniff_model_file(const std::string& path);

struct ExportedOptions {
  std::string path;
  // Image classifiers: the data's input (channels, size) and class count; a
  // head with another class count is replaced (new initialization from the
  // global generator). 0: not checked.
  std::int64_t in_channels = 0;
  std::int64_t image_size = 0;
  std::int64_t num_classes = 0;
  // The head's module name ("classifier.3"); empty: the module that owns the
  // last 2-D weight.
  std::string head;
  // Token models: context > 0 makes it one, (B, context) int64 ids ->
  // (B, context, V) logits with V >= vocab.
  std::int64_t context = 0;
  std::int64_t vocab = 0;
};

// What loading found, for `hotloop inspect model` and the trainer's log.
struct ExportedInfo {
  std::string path;
  ModelFileFormat format;
  std::string head; // the head's module name ("" when none was found)
  std::int64_t head_classes = 0; // the file's head rows, before replacement
  bool head_replaced = false;
  std::vector<std::int64_t> output_shape; // for a batch of 2
  // Layer kinds by their Python class (from the module's types).
  int batch_norms = 0;
  int dropouts = 0;
  // eval() stops BatchNorm updating its statistics, and dropout (same
  // output twice). False: frozen in training mode at export (traced).
  bool eval_freezes_batchnorm = true;
  bool eval_disables_dropout = true;
  // train() makes BatchNorm update its statistics and dropout random. False:
  // frozen in eval mode at export (traced).
  bool train_updates_batchnorm = true;
  bool train_enables_dropout = true;
  std::vector<std::string> warnings;
};

class ExportedModel : public Model {
 public:
  virtual const ExportedInfo& info() const = 0;
  // On token data (tokens_per_sample() > 0) its outputs are next-token
  // logits; else class logits.
  at::Tensor loss(
      const at::Tensor& outputs,
      const at::Tensor& targets,
      const LossOptions& options) const override {
    return tokens_per_sample() > 0
        ? next_token_loss(outputs, targets, options)
        : cross_entropy_loss(outputs, targets, options);
  }
};

// Loads `options.path` on the CPU in training mode and checks it with a
// batch of 2 and of 3 (no gradient, eval mode, buffers restored): forward
// exists, returns one tensor of the expected shape, and follows the batch
// size. Throws DataError (what the file is, what failed, the fix) or
// UsageError.
std::shared_ptr<ExportedModel> load_exported_model(
    const ExportedOptions& options);

} // namespace hotloop::model
